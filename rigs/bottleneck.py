"""A shared bottleneck: one MPTCP connection (two subflows) against one single-path TCP flow.

The emulated testbed gives each radio its own path, so it cannot show what coupling is
for. This builds the textbook topology instead (namespaces ``<prefix>snd``,
``<prefix>rtr``, ``<prefix>rcv``)::

    snd --s0----b0-- bn --b1==[TBF rate, FIFO]==t0-- rtr --r1----c1-- rcv   (TCP flow, subflow 1)
                                                          --r2----c2--       (subflow 2)

This kernel has neither netem nor fq, so the FIFO's depth is the only source of RTT unless
``base_delay_ms`` adds a one-way delay towards the receiver with the user-space delay line
(``harness.emulation.delayline``) in ``rtr`` (``path_delay_ms`` gives each receiver path its own).
The delay line holds only the downlink: "20 ms each way" is 40 ms on the downlink here, the same
round trip (TCP's dynamics see the RTT, not how it splits).
The shaper is a TBF (``qdisc="tbf"``) or, as a router would, HTB at the rate over a byte FIFO
(``qdisc="htb"``).
The bottleneck sits on a router (``bn``), not on the sender's own device: a queue on
the sender's device counts against each socket's TCP Small Queues budget (about 1 ms
of its pacing rate), which throttles flows with small windows and makes the shares a
matter of who got big first.

Every byte from the sender crosses the one shaped link, so both subflows and the TCP
flow share it. ``compete()`` runs both transfers for the same time, with the same
congestion control on both, and returns what each moved. RFC 6356's goal is that the
MPTCP connection takes no more than a single TCP flow would on its best path; uncoupled
congestion control on each subflow takes about two shares out of three.
"""
from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.cc import CongestionControl, bpfcc
from harness.machine import allow_ccs, write_state
from harness.upkeep.claim import PrefixClaim
from harness.upkeep.clean import clean_prefix
from harness.errors import TrafficError
from harness.hosts.local import BackgroundProcess, LocalHost, NamespaceHost
from harness.hosts.ready import listening_ports, wait_until
from harness.hosts.netcmd import (
    addr_add_argv, link_up_argv, mptcp_endpoint_argv, mptcp_limits_argv, netns_add_argv, offloads_off_argv,
    radio_loss_argvs, radio_qdisc_argvs, route_add_argv, rule_add_argv, sysctl_argv, veth_argv,
)
from harness.emulation import delayline
from harness.traffic import Iperf3

log = logging.getLogger("mplab.bottleneck")

SERVER = "10.77.0.1"
MPTCP_PORT, TCP_PORT = 5301, 5302
#: Servers of ``compete_single_path``'s two path flows (plain TCP), started when it first runs.
PATH_PORTS = (5303, 5304)


def tbf_argv(dev: str, rate_mbit: float, limit_bytes: int) -> list[str]:
    """One FIFO bottleneck of ``rate_mbit`` holding ``limit_bytes`` (no netem here: delay is queueing)."""
    return ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{round(rate_mbit * 1000)}kbit",
            "burst", "3028", "limit", str(limit_bytes)]


def htb_bottleneck_argvs(dev: str, rate_mbit: float, limit_bytes: int) -> list[list[str]]:
    """HTB at ``rate_mbit`` over a byte FIFO of ``limit_bytes``: a router's shaped link."""
    return radio_qdisc_argvs(dev, rate_mbit, limit_bytes)


def competing_client_argv(iperf3: Iperf3, port: int, duration_s: int, omit_s: int, cc: str, *,
                          mptcp: bool, bind: str | None = None, window: str | None = None,
                          block: str | None = None) -> list[str]:
    """A reverse-mode client that receives for ``duration_s`` after ``omit_s`` of warm-up; ``window``: iperf3's
    ``-w``, a fixed socket buffer on both ends (the server's sending socket too) in place of autotuning;
    ``block``: iperf3's ``-l``, how much the sending server hands its socket per write (128 KiB by default)."""
    argv = iperf3.client_argv(SERVER, port, None, bind=bind, mptcp=mptcp, cc=cc, duration_s=duration_s,
                              omit_s=omit_s)
    return argv + (["-w", window] if window else []) + (["-l", block] if block else [])


@dataclass(frozen=True)
class Competition:
    """Bytes each flow received in the measured interval, and what the coupling map held."""

    cc: str
    mptcp_bytes: int
    tcp_bytes: int
    #: Largest number of subflows seen together in one coupling-map entry (None: not a BPF CC).
    coupled_subflows: int | None
    #: The competing TCP flow's congestion control.
    tcp_cc: str = ""
    #: Sender retransmissions of the MPTCP connection's subflows and of the TCP flow (iperf3's count).
    mptcp_retransmits: int | None = None
    tcp_retransmits: int | None = None
    #: Samples of the sender's sockets during the run (``probe=True``): see ``SocketSample``.
    samples: tuple = ()
    #: Counters that moved during the run (``probe=True``): ``nstat`` in the sender's and the
    #: receiver's namespaces, names prefixed ``snd:`` and ``rcv:`` (MPTcpExt*, TcpExt*, Tcp*).
    counters: dict = field(default_factory=dict)
    #: The MPTCP-level socket's send buffer and what it held, every half second (``probe=True``):
    #: (seconds since the start, ``tb`` its sndbuf, ``w`` its queued bytes), from ``ss -M -m``.
    msk_memory: tuple = ()

    @property
    def ratio(self) -> float:
        """MPTCP connection's bytes over the TCP flow's."""
        return self.mptcp_bytes / max(1, self.tcp_bytes)


def coupled_subflows(host, algorithm: str) -> int | None:
    """Most subflows with a window in any one entry of ``algorithm``'s coupling map (None if absent)."""
    name = bpfcc.map_name(algorithm)
    res = host.run(["bpftool", "-j", "map", "show"], check=False)
    ids = [m["id"] for m in json.loads(res.stdout or "[]") if m.get("name") == name]
    if not ids:
        return None
    best = 0
    for mid in ids:
        dump = json.loads(host.run(["bpftool", "-j", "map", "dump", "id", str(mid)], check=False).stdout or "[]")
        for entry in dump:
            value = (entry.get("formatted") or {}).get("value") or {}
            slots = value.get("sf", [])
            best = max(best, sum(1 for s in slots if s.get("sk") and s.get("cwnd")))
    return best


@dataclass(frozen=True)
class SocketSample:
    """One sender socket at one instant, from ``ss -tin``: which flow, its window and what is in flight."""

    t_s: float
    flow: str          # "tcp", "sf1" (path 1), "sf2" (path 2)
    cwnd: int
    ssthresh: int | None
    unacked: int
    rtt_ms: float
    bytes_acked: int
    retrans_total: int
    notsent_bytes: int
    send_q_bytes: int
    cc: str
    #: Share of the socket's busy time it was limited by the peer's window / its send buffer (tcp_info).
    rwnd_limited_pct: float = 0.0
    sndbuf_limited_pct: float = 0.0
    #: The kernel's minimum RTT of the socket (``minrtt``), from the RTT samples a delay-based
    #: congestion control takes its base RTT from (Vegas' baseRTT is the smallest sample + 1 us).
    min_rtt_ms: float = 0.0


_SS_FIELD = re.compile(r"(\w+):(\S+)")
_SS_LIMITED = re.compile(r"(rwnd|sndbuf)_limited:\d+ms\(([\d.]+)%\)")


def parse_ss(text: str, t_s: float) -> list[SocketSample]:
    """The data sockets of the rig's sender in ``ss -tinH state established`` output (control sockets,
    which have moved next to nothing, are left out)."""
    out: list[SocketSample] = []
    # A socket is a header line and indented detail lines (an MPTCP subflow adds a tcp-ulp-mptcp one).
    socks: list[list[str]] = []
    for line in text.splitlines():
        if line[:1].isspace() and socks:
            socks[-1][1] += " " + line.strip()
        elif line.strip():
            socks.append([line, ""])
    for head, info in socks:
        cols = head.split()
        if cols and not cols[0].isdigit():
            cols = cols[1:]   # a State column (absent when ss filters on one state)
        if len(cols) < 4:
            continue
        # iperf3 listens on IPv6 with v4-mapped peers: [::ffff:10.77.1.2]:51278
        send_q, local, peer = int(cols[1]), cols[2], cols[3].replace("[::ffff:", "").replace("]", "")
        port = int(local.rsplit(":", 1)[1])
        if port not in (MPTCP_PORT, TCP_PORT):
            continue
        f = dict(_SS_FIELD.findall(info))
        acked = int(f.get("bytes_acked", 0))
        if acked < 100_000:   # iperf3's control connections move a few hundred bytes
            continue
        flow = "tcp" if port == TCP_PORT else ("sf1" if peer.startswith("10.77.1.") else "sf2")
        rtt = float(f.get("rtt", "0/0").split("/")[0])
        retrans = int(f.get("retrans", "0/0").split("/")[1]) if "/" in f.get("retrans", "") else 0
        limited = {k: float(v) for k, v in _SS_LIMITED.findall(info)}
        out.append(SocketSample(t_s, flow, int(f.get("cwnd", 0)), int(f["ssthresh"]) if "ssthresh" in f else None,
                                int(f.get("unacked", 0)), rtt, acked, retrans, int(f.get("notsent", 0)), send_q,
                                info.split()[0], limited.get("rwnd", 0.0), limited.get("sndbuf", 0.0),
                                float(f.get("minrtt", 0.0))))
    return out


_SKMEM = re.compile(r"skmem:\(r\d+,rb\d+,t\d+,tb(\d+),f\d+,w(\d+),")


def msk_memory(text: str) -> tuple[int, int] | None:
    """Of the MPTCP-level sockets ``ss -HMm`` lists, the one holding the most queued bytes (the data
    connection, not iperf3's control one): its send buffer (``tb``) and queued bytes (``w``)."""
    found = [(int(m[2]), int(m[1])) for m in _SKMEM.finditer(text)]
    if not found:
        return None
    w, tb = max(found)
    return tb, w


class NoStream(TrafficError):
    """A flow's iperf3 client never connected its data stream: the run measured nothing, and may be run again."""


def received(results: dict, cc: CongestionControl) -> tuple[dict[str, int], dict[str, int | None]]:
    """Bytes received after the warm-up and the sender's retransmissions, per flow, from iperf3's JSON.

    ``NoStream`` when a client ended with an error before its data stream connected (its ``connected`` list
    empty); ``TrafficError`` for any other flow without a result."""
    got, retrans = {}, {}
    for name, res in results.items():
        try:
            doc = json.loads(res.stdout)
            if doc.get("error") and not doc.get("start", {}).get("connected"):
                raise NoStream(f"{name} flow under {cc.sock_name}: its data stream never connected "
                               f"({doc['error']!r})")
            got[name] = int(doc["end"]["sum_received"]["bytes"])
            retrans[name] = doc["end"].get("sum_sent", {}).get("retransmits")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise TrafficError(f"{name} flow under {cc.sock_name}: no result "
                               f"({(res.stderr or res.stdout).strip()[-300:]!r})") from None
    return got, retrans


def lead_seconds(tcp_lead_s: float) -> int:
    """A head start iperf3 can measure around: whole seconds (its warm-up and run take whole seconds)."""
    if tcp_lead_s != int(tcp_lead_s):
        raise ValueError(f"tcp_lead_s must be whole seconds, not {tcp_lead_s}")
    return int(tcp_lead_s)


def release(procs: dict, tcp_lead_s: float) -> None:
    """Release gated flows together, or the ``tcp`` one ``tcp_lead_s`` seconds before the others
    (negative: the others that long before it)."""
    first = [n for n in procs if (n == "tcp") == (tcp_lead_s > 0)] if tcp_lead_s else list(procs)
    for name in first:
        procs[name].release()
    if tcp_lead_s:
        time.sleep(abs(tcp_lead_s))
        for name, p in procs.items():
            if name not in first:
                p.release()


PSH_TABLE = "mplab_psh"


def strip_psh_argvs(ports: Sequence[int]) -> list[list[str]]:
    """nft commands that clear PSH on the data segments from these source ports before the host's TCP sees them
    (prerouting, the mangle priority; nftables fixes the checksum), counting them in counter ``stripped``.
    nftables sets a field only to a constant, so there is one rule per combination of flags: ACK+PSH (a data
    segment) and FIN+ACK+PSH (the last one); the rig's connections negotiate no ECN. Empty without ports."""
    if not ports:
        return []
    cmds = [["nft", "add", "table", "ip", PSH_TABLE],
            ["nft", "add", "chain", "ip", PSH_TABLE, "pre", "{", "type", "filter", "hook", "prerouting", "priority",
             "-150", ";", "policy", "accept", ";", "}"],
            ["nft", "add", "counter", "ip", PSH_TABLE, "stripped"]]
    for pushed, cleared in (("psh|ack", "ack"), ("fin|psh|ack", "fin|ack")):
        cmds.append(["nft", "add", "rule", "ip", PSH_TABLE, "pre", "tcp", "sport", "{", ", ".join(map(str, ports)), "}",
                     "tcp", "flags", "==", pushed, "counter", "name", "stripped", "tcp", "flags", "set", cleared])
    return cmds


class SharedBottleneck:
    """The topology above; a context manager that removes everything it made."""

    def __init__(self, prefix: str, ccs: list[CongestionControl], rate_mbit: float = 20.0,
                 buffer_bytes: int = 50_000, base_delay_ms: float = 0.0, *, qdisc: str = "tbf",
                 path_delay_ms: tuple[float, float] | None = None,
                 sender_sysctls: dict[str, str | int] | None = None,
                 receiver_sysctls: dict[str, str | int] | None = None, random_loss_pct: float = 0.0,
                 subflows: int = 2, window: str | None = None, block: str | None = None,
                 jitter_ms: float = 0.0, receiver_quickack: bool = False,
                 receiver_strip_psh: Sequence[int] = ()) -> None:
        self.prefix = prefix
        #: One-way delay towards the receiver, by the user-space delay line in ``rtr`` (0: none).
        self.base_delay_ms = base_delay_ms
        #: Downlink delay of path 1 (the TCP flow and subflow 1) and path 2 (subflow 2); overrides the base.
        self.path_delay_ms = path_delay_ms or (base_delay_ms, base_delay_ms)
        #: The delay line holds each packet up to this much longer (uniform, order kept): the paths' jitter.
        if jitter_ms and not any(d > 0 for d in self.path_delay_ms):
            raise ValueError("jitter_ms needs a path delay (the delay line adds it)")
        self.jitter_ms = jitter_ms
        #: The receiver acknowledges every segment at once (its routes' ``quickack 1``) instead of every second one
        #: (delayed ACKs, the default): a diagnostic for how delayed ACKs pair the senders' segments at the FIFO.
        self.receiver_quickack = receiver_quickack
        #: The receiver's TCP never sees PSH on data from these server ports (nftables clears it as the segments come
        #: in; captures on its interfaces still show it): a diagnostic for the ACKs Linux sends on a pushed segment.
        self.receiver_strip_psh = tuple(receiver_strip_psh)
        if qdisc not in ("tbf", "htb"):
            raise ValueError(f"qdisc must be tbf or htb, not {qdisc!r}")
        self.qdisc = qdisc
        #: sysctls set in the sender's namespace (buffer sizes and the like), applied before the servers start.
        self.sender_sysctls = dict(sender_sysctls or {})
        self.receiver_sysctls = dict(receiver_sysctls or {})
        #: Independent random loss on the shaped link (nftables numgen), for comparing tail drops with it.
        self.random_loss_pct = random_loss_pct
        #: 2: the MPTCP connection joins a second subflow on path 2; 1: it keeps its first one only (a control).
        if subflows not in (1, 2):
            raise ValueError(f"subflows must be 1 or 2, not {subflows}")
        self.subflows = subflows
        #: iperf3 ``-w`` for the other side's clients (the MPTCP connection, or the single-path pair): a fixed
        #: socket buffer at both ends; None: the kernel's autotuning, as every transfer of a campaign has it.
        self.window = window
        #: iperf3 ``-l`` for the same clients: how much the sending application hands the socket per write.
        self.block = block
        self.ccs = list(ccs)
        self.rate_mbit = rate_mbit
        self.buffer_bytes = buffer_bytes
        self.root = LocalHost("root")
        self.ns = {r: f"{prefix}{r}" for r in ("snd", "bn", "rtr", "rcv")}
        self.snd = NamespaceHost("snd", self.ns["snd"])
        self.bn = NamespaceHost("bn", self.ns["bn"])
        self.rtr = NamespaceHost("rtr", self.ns["rtr"])
        self.rcv = NamespaceHost("rcv", self.ns["rcv"])
        self.iperf3: Iperf3 | None = None
        self._servers = []
        #: The prefix's claim: a second rig on a live prefix is refused (Busy) instead of deleting the first's namespaces.
        self._claim = PrefixClaim(prefix, "the shared-bottleneck rig")

    def __enter__(self) -> SharedBottleneck:
        self._claim.acquire()   # before anything is cleaned: Busy leaves the live rig alone
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        root, snd, bn, rtr, rcv = self.root, self.snd, self.bn, self.rtr, self.rcv
        clean_prefix(self.prefix, root)
        # Same bookkeeping as the emulated testbed, so clean_prefix() undoes it after a crash
        # and other live testbeds see which congestion controls we need.
        needs = [cc.sock_name for cc in self.ccs]
        write_state(self.prefix, {"prefix": self.prefix, "needs": needs})
        for cc in self.ccs:
            cc.check(root)
            cc.setup(root, owner=self.prefix)
        allow_ccs(root, needs)
        for ns in self.ns.values():
            root.run(netns_add_argv(ns))
        root.run(veth_argv("s0", self.ns["snd"], "b0", self.ns["bn"]))
        root.run(veth_argv("b1", self.ns["bn"], "t0", self.ns["rtr"]))
        root.run(veth_argv("r1", self.ns["rtr"], "c1", self.ns["rcv"]))
        root.run(veth_argv("r2", self.ns["rtr"], "c2", self.ns["rcv"]))
        for host, addrs in ((snd, {"s0": "10.77.0.1/24"}),
                            (bn, {"b0": "10.77.0.2/24", "b1": "10.77.3.1/24"}),
                            (rtr, {"t0": "10.77.3.2/24", "r1": "10.77.1.1/24", "r2": "10.77.2.1/24"}),
                            (rcv, {"c1": "10.77.1.2/24", "c2": "10.77.2.2/24"})):
            host.run(link_up_argv("lo"))
            for dev, cidr in addrs.items():
                host.run(addr_add_argv(dev, cidr))
                host.run(link_up_argv(dev))
                host.run(offloads_off_argv(dev))
        for host in (bn, rtr):
            host.run(sysctl_argv("net.ipv4.ip_forward", 1))
        snd.run(route_add_argv("10.77.0.0/16", via="10.77.0.2"))
        bn.run(route_add_argv("10.77.1.0/24", via="10.77.3.2"))
        bn.run(route_add_argv("10.77.2.0/24", via="10.77.3.2"))
        rtr.run(route_add_argv("10.77.0.0/24", via="10.77.3.1"))
        quickack = ["quickack", "1"] if self.receiver_quickack else []
        rcv.run(route_add_argv("default", via="10.77.1.1", dev="c1") + quickack)
        rcv.run(route_add_argv("default", via="10.77.2.1", dev="c2", table=102) + quickack)
        rcv.run(rule_add_argv("10.77.2.2", 102, 1001))
        self.strip_psh(self.receiver_strip_psh)
        if self.qdisc == "htb":
            for argv in htb_bottleneck_argvs("b1", self.rate_mbit, self.buffer_bytes):
                bn.run(argv)
        else:
            bn.run(tbf_argv("b1", self.rate_mbit, self.buffer_bytes))
        if self.random_loss_pct > 0:
            for argv in radio_loss_argvs([("b1", self.random_loss_pct)]):
                bn.run(argv)
        for host, sysctls in ((snd, self.sender_sysctls), (rcv, self.receiver_sysctls)):
            for key, value in sysctls.items():
                host.run(sysctl_argv(key, value))
        snd.run(mptcp_limits_argv(8, 8))
        rcv.run(mptcp_limits_argv(2, 2))
        if self.subflows == 2:
            rcv.run(mptcp_endpoint_argv("10.77.2.2", "c2", ("subflow",)))
        delays = {dst: ms for dst, ms in zip(("10.77.1.2", "10.77.2.2"), self.path_delay_ms) if ms > 0}
        if delays:
            self._servers.append(delayline.start(rtr, delays, uplink_dev="t0", jitter_ms=self.jitter_ms))
        self.iperf3 = Iperf3.check(root)
        self._servers += [snd.start(self.iperf3.server_argv(MPTCP_PORT, mptcp=True), label="iperf3-mptcp"),
                         snd.start(self.iperf3.server_argv(TCP_PORT, mptcp=False), label="iperf3-tcp")]
        wait_until(lambda: {MPTCP_PORT, TCP_PORT} <= listening_ports(snd), 10,
                   f"iperf3 servers on {MPTCP_PORT} and {TCP_PORT} in the shared-bottleneck topology",
                   poll_s=0.05)

    def strip_psh(self, ports: Sequence[int]) -> None:
        """From now on the receiver's TCP sees no PSH on the data from these server ports; none: PSH passes again.
        The counter starts again from 0."""
        self.rcv.run(["nft", "delete", "table", "ip", PSH_TABLE], check=False)   # absent: nothing to delete
        for argv in strip_psh_argvs(ports):
            self.rcv.run(argv)
        self.receiver_strip_psh = tuple(ports)

    def psh_stripped(self) -> int | None:
        """Segments whose PSH the receiver's nftables cleared so far (None: the rig strips none)."""
        if not self.receiver_strip_psh:
            return None
        out = self.rcv.run(["nft", "list", "counter", "ip", PSH_TABLE, "stripped"]).stdout
        return int(re.search(r"packets (\d+)", out).group(1))

    def compete(self, cc: CongestionControl, duration_s: int = 12, omit_s: int = 3, *,
                tcp_cc: CongestionControl | None = None, probe: bool = False, tcp_lead_s: float = 0.0) -> Competition:
        """MPTCP (2 subflows, ``cc``) and TCP (``tcp_cc``, default ``cc``), started together.

        Returns the bytes each received after the warm-up; with ``probe``, the sender's sockets
        (``ss -ti``) and the MPTCP-level counters every half second. ``tcp_lead_s``: the TCP flow starts that
        long before the other side (negative: after it), whole seconds, and the side that starts first
        measures over the same stretch as the other (its warm-up and run that much longer).
        """
        return self._once_more_without_a_stream(lambda: self._compete(cc, duration_s, omit_s, tcp_cc=tcp_cc,
                                                                      probe=probe, tcp_lead_s=tcp_lead_s))

    def _once_more_without_a_stream(self, run: Callable[[], Competition]) -> Competition:
        """``run()``, and once more if a flow's data stream never connected (``NoStream``: nothing was measured).

        Seen once in a loaded test run: the MPTCP client's data connection never came up and its server closed
        the control connection. The second failure is raised with the servers' output, for what they saw."""
        try:
            return run()
        except NoStream as exc:
            log.warning("%s; running it again", exc)
        try:
            return run()
        except NoStream as exc:
            seen = "; ".join(f"{p.label}: {p.output_so_far()[0].strip()[-300:]!r}"
                             for p in self._servers if p.label.startswith("iperf3") and p.poll() is None)
            raise NoStream(f"{exc} (twice; servers: {seen or 'none running'})") from None

    def _compete(self, cc: CongestionControl, duration_s: int, omit_s: int, *, tcp_cc: CongestionControl | None,
                 probe: bool, tcp_lead_s: float) -> Competition:
        lead = lead_seconds(tcp_lead_s)
        tcp_cc = tcp_cc or cc
        procs = self._clients(cc, tcp_cc, {"mptcp": (MPTCP_PORT, True, None)}, duration_s, omit_s, lead)
        before = self._counters() if probe else {}
        release(procs, tcp_lead_s)
        peak = None
        samples: list[SocketSample] = []
        memory: list[tuple[float, int, int]] = []
        t0 = time.monotonic()
        deadline = t0 + duration_s + omit_s + abs(lead) + 20
        while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
            if cc.algorithm in bpfcc.COUPLED and cc.implementation.startswith("bpf:"):
                seen = coupled_subflows(self.root, cc.algorithm)
                if seen is not None:
                    peak = max(peak or 0, seen)
            if probe:
                now = time.monotonic() - t0
                out = self.snd.run(["ss", "-tinH", "state", "established"], check=False).stdout
                samples += parse_ss(out, now)
                msk = msk_memory(self.snd.run(["ss", "-HMm"], check=False).stdout)
                if msk:
                    memory.append((round(now, 2), *msk))
            time.sleep(0.5)
        after = self._counters() if probe else {}
        moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        results = {name: p.wait(5.0) if p.poll() is not None else p.stop() for name, p in procs.items()}
        got, retrans = received(results, cc)
        return Competition(cc.algorithm, got["mptcp"], got["tcp"], peak, tcp_cc.algorithm,
                           retrans["mptcp"], retrans["tcp"], tuple(samples), moved, tuple(memory))

    def compete_single_path(self, cc: CongestionControl, duration_s: int = 12, omit_s: int = 3, *,
                            tcp_cc: CongestionControl, tcp_lead_s: float = 0.0, mptcp: bool = False) -> Competition:
        """The control for ``compete``: in place of the MPTCP connection, one single-path TCP flow running
        ``cc`` on each of its two paths (bound to the receiver's two addresses), against the same TCP flow.

        What the pair gets against the TCP flow is what two independent flows get at this FIFO: the share
        two uncoupled subflows would have if MPTCP added nothing. ``mptcp_bytes`` is the pair's sum.
        ``tcp_lead_s`` as in ``compete``. ``mptcp``: each path's flow is an MPTCP connection of its own with its
        one subflow (a rig built with ``subflows=1``, so that neither joins a second): MPTCP on every packet,
        without two subflows sharing one connection.
        """
        if mptcp and self.subflows != 1:
            raise ValueError("two single-subflow MPTCP connections need a rig with subflows=1 "
                             "(the receiver's subflow endpoint would join a second subflow to each)")
        assert self.iperf3 is not None
        lead = lead_seconds(tcp_lead_s)
        label = "iperf3-path-mptcp" if mptcp else "iperf3-path"
        if any(p.label.startswith("iperf3-path") and p.label != label for p in self._servers):
            raise ValueError("this rig's path servers run the other protocol: build another rig")
        if not any(p.label == label for p in self._servers):
            self._servers += [self.snd.start(self.iperf3.server_argv(port, mptcp=mptcp), label=label)
                              for port in PATH_PORTS]
            wait_until(lambda: set(PATH_PORTS) <= listening_ports(self.snd), 10, f"iperf3 servers on {PATH_PORTS}",
                       poll_s=0.05)
        paths = {"path1": (PATH_PORTS[0], mptcp, "10.77.1.2"), "path2": (PATH_PORTS[1], mptcp, "10.77.2.2")}

        def run() -> Competition:
            procs = self._clients(cc, tcp_cc, paths, duration_s, omit_s, lead)
            release(procs, tcp_lead_s)
            got, retrans = received({name: p.wait(duration_s + omit_s + abs(lead) + 20)
                                     for name, p in procs.items()}, cc)
            pair_retrans = None if None in (retrans["path1"], retrans["path2"]) else retrans["path1"] + retrans["path2"]
            return Competition(cc.algorithm, got["path1"] + got["path2"], got["tcp"], None, tcp_cc.algorithm,
                               pair_retrans, retrans["tcp"])
        return self._once_more_without_a_stream(run)

    def _clients(self, cc: CongestionControl, tcp_cc: CongestionControl,
                 flows: dict[str, tuple[int, bool, str | None]], duration_s: int, omit_s: int,
                 lead: int) -> dict[str, BackgroundProcess]:
        """Gated reverse-mode clients: each of ``flows`` (name: server port, MPTCP?, bind address) under ``cc``,
        then the TCP flow under ``tcp_cc``. ``lead`` is the TCP flow's head start (whole seconds; negative: the
        others'); the side that starts first warms up and runs that much longer, so both measure one stretch."""
        assert self.iperf3 is not None
        for host in (self.snd, self.rcv):
            # The namespace default covers iperf3's control connections (BBR, this machine's
            # default, is not what we measure); -C sets the data sockets.
            host.run(sysctl_argv("net.ipv4.tcp_congestion_control", cc.sock_name))
        ahead = max(-lead, 0)
        procs = {name: self.rcv.start(competing_client_argv(self.iperf3, port, duration_s + ahead, omit_s + ahead,
                                                            cc.sock_name, mptcp=mptcp, bind=bind, window=self.window,
                                                            block=self.block),
                                      gated=True, label=name)
                 for name, (port, mptcp, bind) in flows.items()}
        procs["tcp"] = self.rcv.start(competing_client_argv(self.iperf3, TCP_PORT, duration_s + max(lead, 0),
                                                            omit_s + max(lead, 0), tcp_cc.sock_name, mptcp=False),
                                      gated=True, label="tcp")
        return procs

    def _counters(self) -> dict[str, int]:
        """Absolute TCP and MPTCP counters of the sender's and receiver's namespaces (nstat, no history file)."""
        out: dict[str, int] = {}
        for side, host in (("snd", self.snd), ("rcv", self.rcv)):
            res = host.run(["nstat", "-asz", "--json"], check=False)
            try:
                doc = json.loads(res.stdout or "{}")
            except json.JSONDecodeError:
                continue
            for table in doc.values():
                for name, value in table.items():
                    if name.startswith(("MPTcpExt", "TcpExt", "Tcp")):
                        out[f"{side}:{name}"] = int(value)
        return out

    def close(self) -> None:
        for p in self._servers:
            try:
                p.stop(grace_s=1.0)
            except Exception:  # noqa: BLE001 - teardown is best effort
                pass
        self._servers = []
        clean_prefix(self.prefix, self.root)   # namespaces, allowed-list edits, unneeded struct_ops
        for cc in self.ccs:
            cc.teardown(self.root)
        self._claim.release()
