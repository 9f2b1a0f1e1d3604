"""One iperf3 TCP transfer on one path of an emulated receiver, and what passed in time windows.

For checking rate caps (tests and bench/caps.py): ``PathTransfer`` runs a reverse-mode iperf3
(the sender sends) bound to the receiver's address on one network, single-path TCP, for a fixed
time. While it runs, ``frame_rate(a, b)`` counts what the gateway's port towards the receiver
(the AP's or the eNB's ``rx<i>``) transmitted between ``a`` and ``b`` seconds after the start:
whole frames, Ethernet header included, the unit both an HTB class and an OpenFlow meter count.
After it ends, ``goodput(a, b)`` is iperf3's own TCP payload rate over the 1 s intervals inside
that window. A full frame carries ``PAYLOAD_SHARE`` of its bytes as payload, so goodput through a
cap sits at most that share of it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from harness.hosts.local import BackgroundProcess
from harness.testbeds.base import parse_link_stats

#: TCP payload per full frame: 1448 of 1514 bytes (14 Ethernet + 20 IP + 32 TCP with timestamps).
PAYLOAD_SHARE = 1448 / 1514


def gateway_tx_bytes(tb, receiver: str, radio: str) -> int:
    """Bytes the gateway (AP for wifi, eNB for lte) transmitted towards ``receiver`` so far."""
    gw = tb.gateway(radio)
    dev = tb.downlink_device(receiver, radio)
    out = gw.run(["ip", "-j", "-s", "link", "show", "dev", dev]).stdout
    return parse_link_stats(out, f"{radio} gateway")[dev].tx_bytes


@dataclass
class PathTransfer:
    """``seconds`` of iperf3 towards ``receiver`` on ``radio`` (single-path TCP, ``cc``); use as a context."""

    tb: object
    receiver: str
    radio: str
    seconds: int
    cc: str = "cubic"
    t0: float = 0.0
    _proc: BackgroundProcess | None = None
    intervals: list[dict] = field(default_factory=list)

    def __enter__(self) -> PathTransfer:
        node = self.tb.nodes[self.receiver]
        self.tb.ensure_servers([self.receiver])
        argv = node.iperf3.client_argv(self.tb.server_address, node.port, None,
                                       bind=node.interfaces[self.radio].address, mptcp=False, cc=self.cc,
                                       duration_s=self.seconds, omit_s=0)
        self._proc = node.host.start(argv, label=f"iperf3:{self.receiver}:{self.radio}")
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    def wait_until(self, at_s: float) -> None:
        """Until ``at_s`` seconds after the start (a point on the transfer's time line, not a readiness wait)."""
        time.sleep(max(0.0, self.t0 + at_s - time.monotonic()))

    def frame_rate(self, start_s: float, end_s: float) -> float:
        """Mbit/s of frames the gateway sent the receiver between ``start_s`` and ``end_s``."""
        self.wait_until(start_s)
        a0, s0 = gateway_tx_bytes(self.tb, self.receiver, self.radio), time.monotonic()
        self.wait_until(end_s)
        return (gateway_tx_bytes(self.tb, self.receiver, self.radio) - a0) * 8 / (time.monotonic() - s0) / 1e6

    def finish(self, timeout_s: float = 10.0) -> list[dict]:
        """Wait for iperf3 (``timeout_s`` at most: it should be ending); its 1 s intervals
        (``RuntimeError`` if it failed)."""
        res = self._proc.wait(timeout_s)
        if res.returncode != 0:
            raise RuntimeError(f"iperf3 towards {self.receiver} on {self.radio} failed: {res.stderr.strip()[-400:]}")
        self.intervals = [i["sum"] for i in json.loads(res.stdout)["intervals"]]
        return self.intervals

    def goodput(self, start_s: float, end_s: float) -> float:
        """Mbit/s of TCP payload over iperf3's intervals within ``start_s``..``end_s``."""
        got = [i for i in self.intervals if i["start"] >= start_s - 0.1 and i["end"] <= end_s + 0.1]
        if not got:
            raise ValueError(f"no iperf3 interval within {start_s}..{end_s} s")
        return sum(i["bytes"] for i in got) * 8 / sum(i["seconds"] for i in got) / 1e6

    def per_second(self, start_s: float, end_s: float) -> list[float]:
        """Goodput (Mbit/s) of each 1 s interval within the window."""
        return [i["bits_per_second"] / 1e6 for i in self.intervals
                if i["start"] >= start_s - 0.1 and i["end"] <= end_s + 0.1]
