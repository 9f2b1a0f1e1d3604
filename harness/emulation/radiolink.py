"""The radio loop: re-shares each emulated access network among the receivers active on it.

Each receiver has its own downlink device in the AP's and the eNB's namespace (``rx<i>``)
with an HTB class (its rate) over a byte FIFO (its buffer): queues build where a radio's
would. This loop, one process per testbed, reads every ``rx<i>`` byte counter
``hz`` times a second, counts a receiver as active on a radio while bytes went to it in
the last ``hold_s``, computes the rates of ``harness.emulation.sharing`` for the active
set and, when they changed, rewrites the HTB classes through one long-lived
``tc -force -batch -`` per namespace (no process per change). Counters come from
``/proc/<tc pid>/net/dev``, which shows the namespace the tc process lives in.

At a speed-up S the loop runs at 20 x S Hz (320 ticks a second at S = 16), so a tick is kept cheap
(``bench/speedup_cpu.py``; ``docs/research/2026-11-29-user-space-cpu.md``): each ``net/dev`` file stays open and is
read again from offset 0 (a seq_file shows the current figures on each read from the start), and a tick whose
active set is the previous tick's stops there. That skip changes no decision: the rates are a pure function of
the active set and the configuration, so the previous tick computed the same ones, and ``apply`` compares them
with the classes as written, which that tick left equal or within 1 % of them (a second call writes nothing).

Run by ``EmulatedTestbed`` inside its sender namespace (so clean-up by namespace stops
it)::

    python -m harness.emulation.radiolink --config '{...}' [--log FILE]

``--log`` appends one JSON line per change: time, active sets, rates (for benches).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.hosts.ready import time_left, wait_until
from harness.emulation.sharing import AccessNetwork, radio_rates

#: SCHED_FIFO priority of the loop and its ``tc`` processes (0: normal scheduling), the delay line's. At S > 1 a
#: tick late is a re-share late by S x as much testbed time: a starting receiver's peers keep their larger
#: shares meanwhile, and the cell carries more than its capacity. The loop sleeps between ticks, so the
#: priority costs the rest of the machine little.
RT_PRIORITY = 10
#: Bytes per tick below which a radio counts as idle (ARP, iperf3's small control messages): a
#: station that receives two full frames per tick (0.5 Mbit/s at 20 Hz) or more is active.
IDLE_BYTES = 1600
RADIOS = ("wifi", "lte")


def htb_rate_line(dev: str, rate_mbit: float) -> str:
    """One ``tc -batch`` line setting a receiver's downlink class (see ``harness.hosts.netcmd.radio_qdisc_argvs``)."""
    kbit = max(8, round(rate_mbit * 1000))
    return f"class change dev {dev} parent 1: classid 1:1 htb rate {kbit}kbit ceil {kbit}kbit quantum 1514"


def net_dev_column(proc_net_dev: str, index: int) -> dict[str, int]:
    """Column ``index`` (0: received bytes, 8: transmitted bytes) per device from the text of
    ``/proc/<pid>/net/dev``."""
    out = {}
    for line in proc_net_dev.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split(None, index + 1)  # no further than the field needed
        if len(fields) > index:
            out[name.strip()] = int(fields[index])
    return out


def read_tx_bytes(proc_net_dev: str) -> dict[str, int]:
    """Transmitted bytes per device from the text of ``/proc/<pid>/net/dev``."""
    return net_dev_column(proc_net_dev, 8)


class NetDev:
    """``/proc/<pid>/net/dev`` kept open and read again from offset 0 on each call (no open per tick).

    A read that fails or comes back empty (the process gone) opens the file again, which raises as a fresh
    open would. The file shows the namespace the process was in when it was opened, for good: ``start`` waits
    for ``ip netns exec`` with fresh reads and keeps a file only after that.
    """

    #: Read size: the whole file at once (a namespace of 20 devices is under 3 KiB).
    CHUNK = 1 << 16

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def text(self) -> str:
        if self.fd is not None:
            try:
                data = os.pread(self.fd, self.CHUNK, 0)
                if data:
                    return self._rest(data).decode()
            except OSError:
                pass
            self.close()
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return self._rest(os.pread(self.fd, self.CHUNK, 0)).decode()

    def _rest(self, data: bytes) -> bytes:
        """``data`` and whatever follows it when one read did not hold the whole file."""
        while len(data) % self.CHUNK == 0 and data:
            more = os.pread(self.fd, self.CHUNK, len(data))
            if not more:
                break
            data += more
        return data

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


@dataclass
class LinkConfig:
    """What the loop needs: per radio the namespace, model and stations (receiver -> (device, rate alone))."""

    namespaces: dict[str, str]
    networks: dict[str, AccessNetwork]
    stations: dict[str, dict[str, tuple[str, float]]]
    coexistence_factor: float | dict[int, float] = 1.0
    hz: float = 20.0
    hold_s: float = 0.25

    def to_json(self) -> str:
        return json.dumps({
            "namespaces": self.namespaces,
            "networks": {r: {"sharing": n.sharing, "capacity_mbit": n.capacity_mbit,
                             "capacity_by_active": ({str(k): v for k, v in n.capacity_by_active.items()}
                                                    if n.capacity_by_active else None)}
                         for r, n in self.networks.items()},
            "stations": {r: {s: list(v) for s, v in st.items()} for r, st in self.stations.items()},
            "coexistence_factor": (self.coexistence_factor if isinstance(self.coexistence_factor, (int, float))
                                   else {str(k): v for k, v in self.coexistence_factor.items()}),
            "hz": self.hz, "hold_s": self.hold_s})

    @classmethod
    def from_json(cls, text: str) -> LinkConfig:
        d = json.loads(text)
        nets = {r: AccessNetwork(n["sharing"], n["capacity_mbit"],
                                 {int(k): v for k, v in n["capacity_by_active"].items()}
                                 if n.get("capacity_by_active") else None)
                for r, n in d["networks"].items()}
        stations = {r: {s: (v[0], float(v[1])) for s, v in st.items()} for r, st in d["stations"].items()}
        k = d.get("coexistence_factor", 1.0)
        k = {int(n): v for n, v in k.items()} if isinstance(k, dict) else k
        return cls(d["namespaces"], nets, stations, k, d.get("hz", 20.0),
                   d.get("hold_s", 0.25))

    def solo_rates(self) -> dict[str, dict[str, float]]:
        """Each station's rate when it is the only one active (the idle setting)."""
        return {r: {s: min(rate, self.networks[r].capacity(1)) for s, (_, rate) in st.items()}
                for r, st in self.stations.items()}


class RadioLoop:
    """The control loop (see the module docstring)."""

    def __init__(self, cfg: LinkConfig, log_path: str | None = None) -> None:
        self.cfg = cfg
        self.log = open(log_path, "a") if log_path else None  # noqa: SIM115 - closed in close()
        self.tc: dict[str, subprocess.Popen] = {}
        self.current: dict[str, dict[str, float]] = {r: {} for r in RADIOS}
        self.last_seen: dict[str, dict[str, float]] = {r: {} for r in RADIOS}
        self.last_bytes: dict[str, dict[str, int]] = {}
        self.running = True
        self._net_dev: dict[str, NetDev] = {}
        #: The idle setting (``LinkConfig.solo_rates``), worked out once: the configuration does not change.
        self._solo = cfg.solo_rates()
        #: The previous tick's active set (receiver -> its active radios); None before the first tick.
        self._active: dict[str, set[str]] | None = None

    def start(self) -> None:
        for radio, ns in self.cfg.namespaces.items():
            # -force: one bad line (a device gone during teardown) must not end the batch.
            self.tc[radio] = subprocess.Popen(["ip", "netns", "exec", ns, "tc", "-force", "-batch", "-"],
                                              stdin=subprocess.PIPE, text=True, bufsize=1)
        # Until `ip netns exec` has entered the namespace, /proc/<pid>/net/dev shows the wrong devices, and a
        # file opened before then keeps showing them: each look opens it afresh, and only then is it kept.
        end = time.monotonic() + 10
        for radio in self.tc:
            want = {dev for dev, _ in self.cfg.stations[radio].values()}
            path = f"/proc/{self.tc[radio].pid}/net/dev"
            wait_until(lambda path=path, want=want: want <= set(read_tx_bytes(Path(path).read_text())),
                       time_left(end), f"tc in {self.cfg.namespaces[radio]} seeing {sorted(want)}",
                       proc=self.tc[radio], poll_s=0.01)
        self.apply(self._solo)
        for radio in self.tc:
            self.last_bytes[radio] = self._counters(radio)
        if self.log:
            self.log.write(json.dumps({"t": time.time(), "ready": True, "rates": self.current}) + "\n")
            self.log.flush()

    def _counters(self, radio: str) -> dict[str, int]:
        path = f"/proc/{self.tc[radio].pid}/net/dev"
        dev = self._net_dev.get(radio)
        if dev is None or dev.path != path:
            if dev is not None:
                dev.close()
            dev = self._net_dev[radio] = NetDev(path)
        return read_tx_bytes(dev.text())

    def apply(self, rates: dict[str, dict[str, float]]) -> bool:
        """Write the classes whose rate changed by more than 1 %; True if any did."""
        changed = False
        for radio, per in rates.items():
            lines = []
            for s, x in per.items():
                old = self.current[radio].get(s)
                if old is None or abs(x - old) > 0.01 * max(old, 1e-3):
                    lines.append(htb_rate_line(self.cfg.stations[radio][s][0], max(x, 0.008)) + "\n")
                    self.current[radio][s] = x
            if lines:
                self.tc[radio].stdin.write("".join(lines))
                self.tc[radio].stdin.flush()
                changed = True
        return changed

    def step(self, now: float) -> None:
        active: dict[str, set[str]] = {}
        hold_s = self.cfg.hold_s
        for radio in self.tc:
            counters = self._counters(radio)
            last, seen = self.last_bytes[radio], self.last_seen[radio]
            for s, (dev, _) in self.cfg.stations[radio].items():
                if counters.get(dev, 0) - last.get(dev, 0) > IDLE_BYTES:
                    seen[s] = now
                if now - seen.get(s, -1e9) <= hold_s:
                    active.setdefault(s, set()).add(radio)
            self.last_bytes[radio] = counters
        if active == self._active:
            return  # the previous tick's set: the same rates, already applied (module docstring)
        self._active = active
        solo = self._solo
        rates = {r: dict(solo[r]) for r in RADIOS if r in solo}
        if active:
            shared = radio_rates(self.cfg.networks["wifi"], self.cfg.networks["lte"],
                                 {s: v[1] for s, v in self.cfg.stations["wifi"].items()},
                                 {s: v[1] for s, v in self.cfg.stations["lte"].items()},
                                 {s: frozenset(v) for s, v in active.items()}, self.cfg.coexistence_factor)
            for s, radios in active.items():
                for r in radios:
                    rates[r][s] = shared[s][r]
        # An idle station keeps the rate it would get if it started now alone; it is not counted.
        if self.apply(rates) and self.log:
            self.log.write(json.dumps({"t": time.time(), "active": {s: sorted(v) for s, v in active.items()},
                                       "rates": {r: {s: round(x, 3) for s, x in per.items()}
                                                 for r, per in self.current.items()}}) + "\n")
            self.log.flush()

    def run(self) -> None:
        period = 1.0 / self.cfg.hz
        nxt = time.monotonic()
        while self.running:
            self.step(time.monotonic())
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()  # fell behind (a loaded machine): do not burst

    def close(self) -> None:
        for dev in self._net_dev.values():
            dev.close()
        for p in self.tc.values():
            try:
                p.stdin.close()
                p.wait(2.0)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
        if self.log:
            self.log.close()


def radiolink_argv(cfg: LinkConfig, log_path: str | None = None, python: str = sys.executable,
                   rt_priority: int = RT_PRIORITY) -> list[str]:
    """The argument list that starts the loop (for a Host's ``start``)."""
    argv = [python, "-m", "harness.emulation.radiolink", "--config", cfg.to_json(), "--rt-priority", str(rt_priority)]
    if log_path:
        argv += ["--log", log_path]
    return argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="LinkConfig as JSON")
    ap.add_argument("--log", help="append one JSON line per change")
    ap.add_argument("--rt-priority", type=int, default=0,
                    help="run under SCHED_FIFO at this priority (1-99; 0: normal scheduling); its tc processes inherit it")
    args = ap.parse_args(argv)
    if args.rt_priority > 0:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
    loop = RadioLoop(LinkConfig.from_json(args.config), args.log)

    def _stop(*_):
        loop.running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        loop.start()
        print("radiolink ready", flush=True)
        loop.run()
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
