"""What the related schemes need measured, and where each number comes from.

- Per receiver and path, transport state from the **sender's** MPTCP subflows (``ss -tinH``
  in the sender's namespace or on the sender machine): the base RTT (``minrtt:``, ms: the
  subflow's minimum RTT, which the probe's own queueing does not inflate), the smoothed RTT
  (``rtt:``, recorded), the congestion window (``cwnd:``, segments) and the retransmission ratio
  ``bytes_retrans / bytes_sent`` (``retrans``/``data_segs_out`` when the byte counters are absent).
  A subflow belongs to the receiver and path whose address is its peer address; when several
  sockets match (iperf3's control connection), the one that sent the most bytes is the data subflow.
- Per receiver and path, the path's **random loss**: packets dropped / packets seen by the
  testbed's loss rules over the probe window (``Testbed.radio_loss_counters``; on the emulated
  testbed nftables counters before the radio queue). Where the testbed has none (a lab, a real
  cell) the retransmission ratio stands in, and the record says so: a retransmission ratio
  counts the probe's own drops at a full queue too (a 1 s Cubic probe overflowing a 60 ms buffer
  in slow start read as 6 % on a lossless 3G path), which is not the loss the schemes' models mean.
- Per access network, the congestion signal MP-SDN reads from the AP's MAC queue: the occupancy of
  the network's shaping FIFOs (``tc -s -j qdisc``), sum of backlogs over sum of limits of the leaf
  ``bfifo`` (bytes) / ``pfifo`` (packets) queues, sampled during an execution interval and averaged.

Pure parsers (tested against captured output in tests/data) plus the two argv builders. The
``source`` of each ``PathStats`` names, per field, where its number came from (``SOURCES``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.errors import MplabError
from harness.testbeds.base import LOSS_COUNTERS_SOURCE, LossCounters

from controller.policy import PathStats

#: Per PathStats field, where its number came from (the values recorded in ``source``).
SOURCES = {
    "minrtt": "ss-minrtt",          # ss -tin minrtt: the subflow's minimum RTT
    "srtt": "ss-srtt",              # ss -tin rtt: the smoothed RTT (queueing included)
    "cwnd": "ss-cwnd",
    "retrans": "ss-retrans",        # bytes_retrans / bytes_sent of the subflow
    "counters": LOSS_COUNTERS_SOURCE,  # the testbed's loss rules' counters over the probe window
}
QUEUE_SOURCE = "tc -s -j qdisc (shaping FIFOs): sum backlog / sum limit"


def ss_argv() -> list[str]:
    """Established TCP sockets with internal TCP information, numeric, no header."""
    return ["ss", "-tinH", "state", "established"]


def qdisc_argv(dev: str) -> list[str]:
    return ["tc", "-s", "-j", "qdisc", "show", "dev", dev]


@dataclass(frozen=True)
class Subflow:
    """One TCP socket as ``ss -ti`` shows it (an MPTCP subflow when ``mptcp`` is set)."""

    local: str
    peer: str
    rtt_s: float | None
    cwnd_pkts: float | None
    bytes_sent: int
    bytes_retrans: int
    segs_out: int
    retrans_total: int
    mptcp: bool
    #: ``minrtt:`` (the kernel's windowed minimum RTT); None where ss does not print it.
    min_rtt_s: float | None = None

    @property
    def loss(self) -> float | None:
        if self.bytes_sent > 0:
            return self.bytes_retrans / self.bytes_sent
        if self.segs_out > 0:
            return self.retrans_total / self.segs_out
        return None


def _host(addr_port: str) -> str:
    """``10.99.0.2%lo:57729`` / ``[::ffff:127.0.0.1]:5999`` -> the bare IPv4 or IPv6 address."""
    host = addr_port.rsplit(":", 1)[0].strip("[]")
    host = host.split("%", 1)[0]
    return host[7:] if host.startswith("::ffff:") else host


_KV = re.compile(r"(\w+):(\S+)")


def parse_ss(text: str) -> list[Subflow]:
    """Sockets from ``ss -tin`` output (with or without a header line; info on the following line)."""
    out: list[Subflow] = []
    head: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("State"):
            continue
        if not line[0].isspace():
            parts = line.split()
            # With a state filter ss omits the State column: Recv-Q Send-Q Local Peer.
            head = parts[-2:] if len(parts) >= 4 else None
            continue
        if head is None:
            continue
        kv = dict(_KV.findall(line))
        rtt, minrtt = kv.get("rtt"), kv.get("minrtt")
        retrans = kv.get("retrans", "0/0").split("/")
        out.append(Subflow(
            local=_host(head[0]), peer=_host(head[1]),
            rtt_s=float(rtt.split("/")[0]) / 1000 if rtt else None,
            cwnd_pkts=float(kv["cwnd"]) if "cwnd" in kv else None,
            bytes_sent=int(kv.get("bytes_sent", 0)), bytes_retrans=int(kv.get("bytes_retrans", 0)),
            segs_out=int(kv.get("data_segs_out", kv.get("segs_out", 0))),
            retrans_total=int(retrans[-1]) if retrans[-1].isdigit() else 0,
            mptcp="tcp-ulp-mptcp" in line,
            min_rtt_s=float(minrtt) / 1000 if minrtt else None))
        head = None
    return out


def path_stats(subflows: Iterable[Subflow], addresses: Mapping[str, Mapping[str, str]],
               loss_counts: Mapping[str, Mapping[str, LossCounters]] | None = None) -> dict[str, dict[str, PathStats]]:
    """``{receiver: {network: PathStats}}`` from the sender's sockets; ``addresses`` = receiver -> network -> address.

    Per (receiver, network) the socket with the most bytes sent wins (the data subflow, not
    iperf3's control connection); a path with no socket is left out. ``rtt_s`` is the subflow's
    minimum RTT (its smoothed RTT where ss prints no ``minrtt``); ``loss`` is the loss counted by
    the testbed's loss rules on that path (``loss_counts``, over the probe window) when it saw any
    packet, else the retransmission ratio. ``source`` says which, per field.
    """
    by_addr = {a: (rx, net) for rx, nets in addresses.items() for net, a in nets.items()}
    best: dict[tuple[str, str], Subflow] = {}
    for s in subflows:
        key = by_addr.get(s.peer)
        if key is None:
            continue
        if key not in best or s.bytes_sent > best[key].bytes_sent:
            best[key] = s
    out: dict[str, dict[str, PathStats]] = {rx: {} for rx in addresses}
    for (rx, net), s in best.items():
        counted = (loss_counts or {}).get(rx, {}).get(net)
        by_counters = counted is not None and counted.loss is not None
        rtt = s.min_rtt_s if s.min_rtt_s else s.rtt_s
        out[rx][net] = PathStats(
            rtt_s=rtt, loss=counted.loss if by_counters else s.loss, cwnd_pkts=s.cwnd_pkts,
            source={"rtt_s": SOURCES["minrtt" if s.min_rtt_s else "srtt"],
                    "loss": SOURCES["counters" if by_counters else "retrans"],
                    "cwnd_pkts": SOURCES["cwnd"], "srtt_s": SOURCES["srtt"], "retrans_ratio": SOURCES["retrans"]},
            srtt_s=s.rtt_s, retrans_ratio=s.loss,
            loss_pkts={"seen": counted.seen_pkts, "lost": counted.lost_pkts} if by_counters else None)
    return out


def queue_fill(tc_json: str) -> tuple[float, float]:
    """(backlog, limit) summed over the leaf FIFOs of one device's ``tc -s -j qdisc show``.

    bfifo counts bytes, pfifo packets; each queue's fill is taken in its own unit, so the two are
    added as fractions of their own limit weighted by that limit (a device has one kind here).
    The HTB root reports its children's backlog again and is skipped.
    """
    try:
        qdiscs = json.loads(tc_json)
    except json.JSONDecodeError as exc:
        raise MplabError(f"cannot parse `tc -s -j qdisc` output ({exc})") from None
    backlog = limit = 0.0
    for q in qdiscs:
        kind = q.get("kind")
        lim = (q.get("options") or {}).get("limit")
        if kind not in ("bfifo", "pfifo") or not lim:
            continue
        backlog += float(q.get("backlog", 0) if kind == "bfifo" else q.get("qlen", 0))
        limit += float(lim)
    return backlog, limit


def network_of(key: str) -> str | None:
    """The access network of a ``testbed.qdisc_stats()`` key: the sender's egress towards the AP / eNB
    (``snd:to-ap``, ``snd:to-enb``: channels shaped at the sender) or the AP's / eNB's namespace
    (``ap``, ``enb``: every downlink device there, channels shaped at the access network)."""
    if key == "ap" or key.startswith(("snd:to-ap", "ap:")):
        return "wifi"
    if key == "enb" or key.startswith(("snd:to-enb", "enb:")):
        return "lte"
    return None


def occupancy(stats: Mapping[str, str]) -> dict[str, float]:
    """Per network, sum backlog / sum limit of its FIFOs, from one ``qdisc_stats()`` snapshot."""
    fill: dict[str, list[float]] = {}
    for key, text in stats.items():
        net = network_of(key)
        if net is None or text.startswith("error:"):
            continue
        b, lim = queue_fill(text)
        acc = fill.setdefault(net, [0.0, 0.0])
        acc[0] += b
        acc[1] += lim
    return {net: (b / lim if lim else 0.0) for net, (b, lim) in fill.items()}


def mean_occupancy(snapshots: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The mean over an interval's snapshots, per network (MP-SDN's MacOcc over one EI)."""
    snaps = list(snapshots)
    nets = {n for s in snaps for n in s}
    return {n: sum(s.get(n, 0.0) for s in snaps) / len(snaps) for n in sorted(nets)} if snaps else {}


@dataclass(frozen=True)
class Fifo:
    """One leaf FIFO in one snapshot: its network, fill, limit (same unit) and bytes sent so far."""

    network: str
    backlog: float
    limit: float
    sent_bytes: int


def fifos(stats: Mapping[str, str]) -> dict[tuple[str, str], Fifo]:
    """Every leaf FIFO of a ``qdisc_stats()`` snapshot, keyed by ("<key>:<dev>", handle): one key may list
    every device of a namespace (``tc -s -j qdisc show`` without ``dev``), each FIFO handle per device."""
    out: dict[tuple[str, str], Fifo] = {}
    for key, text in stats.items():
        net = network_of(key)
        if net is None or text.startswith("error:"):
            continue
        try:
            qdiscs = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MplabError(f"cannot parse `tc -s -j qdisc` output of {key} ({exc})") from None
        for q in qdiscs:
            kind, lim = q.get("kind"), (q.get("options") or {}).get("limit")
            if kind in ("bfifo", "pfifo") and lim:
                out[(f"{key}:{q.get('dev', '')}", str(q.get("handle")))] = Fifo(net, float(q.get("backlog", 0) if kind == "bfifo"
                                                                  else q.get("qlen", 0)), float(lim),
                                                        int(q.get("bytes", 0)))
    return out


def interval_occupancy(snapshots: list[dict[tuple[str, str], Fifo]], how: str = "max") -> dict[str, float]:
    """MP-SDN's MacOcc per network over one interval: the mean over snapshots of the fill of the FIFOs
    that were *active* in the interval (sent bytes or held a backlog).

    The emulated AP keeps one FIFO per station where the paper's AP has one MAC queue. ``how="max"``
    (default) reads the AP's queue as its fullest active station queue: a backlogged Tier-1 flow
    filling its station's queue is what the paper's MacOcc sees; a Tier-2 flow held by its cap
    downstream leaves an empty queue that must not dilute the signal. ``how="sum"``: sum backlog /
    sum limit over the active queues (one shared buffer). Idle stations never count.
    """
    if not snapshots:
        return {}
    first, last = snapshots[0], snapshots[-1]
    active = {k for k in last if last[k].sent_bytes > first.get(k, last[k]).sent_bytes
              or any(s.get(k) and s[k].backlog > 0 for s in snapshots)}
    nets = sorted({f.network for f in last.values()})
    out = {}
    for net in nets:
        vals = []
        for snap in snapshots:
            qs = [f for k, f in snap.items() if k in active and f.network == net]
            if how == "max":
                vals.append(max((f.backlog / f.limit for f in qs), default=0.0))
            else:
                lim = sum(f.limit for f in qs)
                vals.append(sum(f.backlog for f in qs) / lim if lim else 0.0)
        out[net] = sum(vals) / len(vals)
    return out
