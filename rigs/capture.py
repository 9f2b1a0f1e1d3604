"""Where a drop-tail FIFO's drops fall: packets captured on both sides of the shared bottleneck.

tcpdump in the bottleneck's namespace records every data packet from the sender as it arrives (``b0``,
inbound) and as it leaves (``b1``, outbound: the kernel's packet tap runs after the qdisc has dequeued it),
with kernel timestamps on one clock. A packet seen arriving and never leaving within the FIFO's longest
sojourn was dropped by it.

Per flow (the TCP flow, subflow 1, subflow 2 of rigs/bottleneck.py) this gives packets, drops, loss events
(a flow's drops within one round trip count once, as TCP reacts to them once) and how the flow's packets
reach the FIFO: in *trains* of back-to-back packets, a train ending where the gap to the flow's next packet
is at least half a packet's time at the bottleneck's rate. An ACK-clocked flow at a full link sends a train
per ACK (2 packets with delayed ACKs, a few more while its window grows); a sender that delivers a
window's worth in one go sends long trains, and a drop-tail FIFO drops the tail of a long train first. The
mean train length *a drop fell in*, beside the mean train length *a packet is in*, says whether drops
select the long trains.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from pathlib import Path

from harness.hosts.local import BackgroundProcess, NamespaceHost
from harness.hosts.ready import wait_until

#: Data packets only (pure ACKs and the iperf3 control connection's small writes are shorter).
DATA_FILTER = "tcp and src host {src} and greater 200"
#: Pure ACKs to the sender (data segments are longer).
ACK_FILTER = "tcp and dst host {dst} and less 200"

#: One tcpdump text line (``-tt -n -S``) of a data segment: time, source, destination, sequence range.
_LINE = re.compile(r"^(\d+\.\d+) IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+): "
                   r"Flags \[([^\]]*)\], seq (\d+):(\d+)")
#: One tcpdump text line (``-tt -n -S``) of a segment carrying an ACK: time, source, destination, the ACK number.
_ACK_LINE = re.compile(r"^(\d+\.\d+) IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+): "
                       r"Flags \[[^\]]*\], (?:seq \d+(?::\d+)?, )?ack (\d+), win (\d+)")
_DATA_ACK = re.compile(r"mptcp \d+ dss ack (\d+)")
#: A DSS option's mapping: the data sequence number, the subflow sequence number (relative to the subflow's initial
#: one) it starts at, and its length.
_DSS_MAP = re.compile(r"mptcp \d+ dss (?:ack \d+ )?seq (\d+) subseq (\d+) len (\d+)")
#: A SYN or SYN-ACK: the endpoints and the initial sequence number.
_SYN_LINE = re.compile(r"^\d+\.\d+ IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+): "
                       r"Flags \[S\.?\], seq (\d+)")
_KERNEL_DROPS = re.compile(r"(\d+) packets? dropped by kernel")


@dataclass(frozen=True)
class Packet:
    t: float
    flow: str
    seq: int
    end: int
    #: The segment carried PSH (tcpdump's ``P``): its sender marked the end of what it had queued.
    psh: bool = False
    #: An MPTCP subflow's segment: the connection-level (data) sequence number of its first byte, from the DSS
    #: mapping it carried and its subflow's initial sequence number (None: not known).
    dseq: int | None = None
    #: The destination port (the receiver's side): a flow's data connection and iperf3's control connection share
    #: the flow's name.
    port: int = 0


def capture_argv(dev: str, direction: str, path: str, src: str) -> list[str]:
    """tcpdump writing ``dev``'s data packets from ``src`` in one ``direction`` (in, out) to ``path``."""
    return _tcpdump_argv(dev, direction, path, DATA_FILTER.format(src=src))


def ack_capture_argv(dev: str, path: str, dst: str) -> list[str]:
    """tcpdump writing the pure ACKs to ``dst`` that arrive on ``dev`` to ``path``."""
    return _tcpdump_argv(dev, "in", path, ACK_FILTER.format(dst=dst))


def _tcpdump_argv(dev: str, direction: str, path: str, expression: str) -> list[str]:
    return ["tcpdump", "-i", dev, "-Q", direction, "-n", "-s", "128", "-B", "16384", "-U", "-w", path, expression]


def read_argv(path: str) -> list[str]:
    """tcpdump printing a capture file: epoch times, numeric addresses, absolute sequence numbers."""
    return ["tcpdump", "-r", path, "-tt", "-n", "-S"]


def kernel_drops(stderr: str) -> int | None:
    """The packets tcpdump says the kernel dropped before it saw them (a capture that lost packets)."""
    m = _KERNEL_DROPS.search(stderr)
    return int(m.group(1)) if m else None


def parse(text: str, flow_of) -> list[Packet]:
    """The data segments of tcpdump's text output, each named by ``flow_of(src_port, dst_addr)`` (None: not ours)."""
    out = []
    isn: dict[tuple[str, ...], int] = {}   # (src, sport, dst, dport) -> the sender's initial sequence number
    for line in text.splitlines():
        syn = _SYN_LINE.match(line)
        if syn:
            isn[syn.groups()[:4]] = int(syn.group(5))
            continue
        m = _LINE.match(line)
        if not m or (flow := flow_of(int(m.group(3)), m.group(4))) is None:
            continue
        seq, dss = int(m.group(7)), _DSS_MAP.search(line)
        start = isn.get(m.groups()[1:5])
        # The mapping starts at subflow sequence number subseq (the initial sequence number is 0); a segment inside it
        # is as far into the data as into the mapping.
        dseq = (int(dss.group(1)) + (seq - start) % 2**32 - int(dss.group(2))) if dss and start is not None else None
        out.append(Packet(float(m.group(1)), flow, seq, int(m.group(8)), "P" in m.group(6), dseq, int(m.group(5))))
    return out


def _matching(text: str, line: re.Pattern) -> Iterable[re.Match]:
    """The lines of ``text`` that ``line`` matches (at their start)."""
    return (m for m in map(line.match, text.splitlines()) if m)


@dataclass(frozen=True)
class AckSeen:
    t: float
    flow: str
    ack: int
    #: The ACK's source port: a flow's data connection and iperf3's control connection share the flow's name.
    port: int = 0
    #: The window field as sent (not scaled).
    win: int | None = None
    #: The MPTCP-level acknowledgement (DSS option's data ack) it carried, if any.
    data_ack: int | None = None


def parse_acks(text: str, flow_of) -> list[AckSeen]:
    """The ACKs in tcpdump's text output, each named by ``flow_of(dst_port, src_addr)`` (the data's source port
    and destination address: the flow the ACK is for; None: not ours)."""
    out = []
    for m in _matching(text, _ACK_LINE):
        flow = flow_of(int(m.group(5)), m.group(2))
        if flow is not None:
            d = _DATA_ACK.search(m.string)
            out.append(AckSeen(float(m.group(1)), flow, int(m.group(6)), int(m.group(3)), int(m.group(7)),
                               int(d.group(1)) if d else None))
    return out


#: What ``data_connection`` sorts: anything named by its flow and the receiver's port.
_OnPort = TypeVar("_OnPort", "AckSeen", "Packet")


def data_connection(items: Sequence[_OnPort]) -> list[_OnPort]:
    """The ACKs (or segments) of each flow's busiest connection, told apart by the receiver's port: iperf3's control
    connection shares the data's server port and the receiver's address (and, for MPTCP, is a connection of its own
    with its own data sequence)."""
    busiest = {}
    for (flow, port), _ in Counter((a.flow, a.port) for a in items).most_common()[::-1]:
        busiest[flow] = port
    return [a for a in items if busiest[a.flow] == a.port]


def _after(a: int, b: int) -> bool:
    """Sequence number ``a`` is after ``b`` (mod 2^32, as TCP compares them)."""
    return 0 < (a - b) % 2**32 < 2**31


def ack_progress(acks: Sequence[AckSeen]) -> Iterator[tuple[AckSeen, int | None, bool]]:
    """Each ACK in time order, with its flow's highest ACK before it (None for the flow's first) and whether it
    acknowledged new data (an *advancing* ACK: past that highest one)."""
    highest: dict[str, int] = {}
    for a in sorted(acks, key=lambda a: a.t):
        prev = highest.get(a.flow)
        advancing = prev is not None and _after(a.ack, prev)
        if prev is None or advancing:
            highest[a.flow] = a.ack
        yield a, prev, advancing


def first_seen(packets: Iterable[Packet]) -> dict[str, dict[int, tuple[int, float]]]:
    """Per flow, each segment's end and the time it was first seen (``seq -> (end, t)``, sequence numbers mod
    2^32, in time order): a retransmission keeps its first sending's or arrival's time."""
    out: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
    for p in sorted(packets, key=lambda p: p.t):
        out[p.flow].setdefault(p.seq % 2**32, (p.end % 2**32, p.t))
    return out


def _along(segs: dict[int, tuple[int, float]], start: int, stop: int, limit: int) -> list[int] | None:
    """The sequence numbers of the segments from ``start`` up to ``stop`` along ``segs`` (``first_seen``'s), or None
    where that range does not run along them (a segment not seen) or holds more than ``limit``."""
    seqs, seq = [], start
    while seq != stop:
        if seq not in segs or len(seqs) >= limit:
            return None
        seqs.append(seq)
        seq = segs[seq][0]
    return seqs


def ack_clock(acks: Sequence[AckSeen], data: Sequence[Packet], since: float = 0.0, prompt_s: float = 100e-6,
              connections: Iterable[Iterable[str]] = ()) -> dict[str, dict]:
    """How each flow's sender answers its ACKs, from one capture at the sender's interface (ACKs in, data out,
    one clock). For every ACK at or after ``since`` that acknowledged new data (an advancing ACK), the time until
    the flow sent its next data segment, how many it sent before its next such ACK, and whether another subflow
    of its connection sent first.

    A TCP sender with a full window sends from the ACK's own softirq: new segments leave within microseconds
    (``prompt_s``). An MPTCP subflow has only what the connection-level socket pushed to it; after an ACK the
    connection pushes on whichever subflow its scheduler picks, at once or when the application releases the
    socket (upstream ``ack_update_msk``, ``__mptcp_check_push``, ``mptcp_release_cb``). A subflow that answers
    late, or whose ACKs are answered on the other subflow, is not clocked by its own ACKs.

    Per flow: advancing ACKs; the share answered by the flow within ``prompt_s``; the lag's median, 90th and
    99th percentile (ms) over those answered before the flow's next advancing ACK; the share not answered before
    it; how many segments the flow sent between one advancing ACK and its next (``sent_per_ack``: shares of 0,
    1, 2, 3, 4 or more: an ACK clock with delayed ACKs sends 2, and 3 where the window grew; a flow refilled late
    sends 1 and then 3); and for a flow of one of ``connections`` (sets of flow names: an MPTCP connection's
    subflows), the share after which another subflow of its connection sent data before it did
    (``answered_elsewhere``).
    A flow's ACKs are those of its busiest connection (iperf3's control connection has the same ports)."""
    events = sorted([(a.t, 0, (a, adv)) for a, _, adv in ack_progress(data_connection(acks))]
                    + [(p.t, 1, p) for p in data], key=lambda e: (e[0], e[1]))
    pending: dict[str, float] = {}          # flow -> time of its advancing ACK not yet answered
    sibling = {f: set(c) - {f} for c in map(set, connections) for f in c}
    waiting_first: set[str] = set()          # flows whose last advancing ACK no subflow of theirs answered yet
    lags: dict[str, list[float]] = defaultdict(list)
    unanswered: Counter = Counter()
    elsewhere: Counter = Counter()
    counted: Counter = Counter()
    sent: dict[str, int] = {}                # flow -> its segments since its last counted advancing ACK
    per_ack: dict[str, Counter] = defaultdict(Counter)
    for t, kind, e in events:
        if kind == 0:
            e, advancing = e
            if not advancing or t < since:
                continue
            if e.flow in pending:               # its previous advancing ACK got no answer before this one
                unanswered[e.flow] += 1
            if e.flow in sent:
                per_ack[e.flow][min(sent[e.flow], 4)] += 1
            sent[e.flow] = 0
            pending[e.flow] = t
            counted[e.flow] += 1
            if e.flow in sibling:
                waiting_first.add(e.flow)
        else:
            for flow in [f for f in waiting_first if f == e.flow or e.flow in sibling[f]]:
                elsewhere[flow] += flow != e.flow
                waiting_first.discard(flow)
            if e.flow in sent:
                sent[e.flow] += 1
            if e.flow in pending:
                lags[e.flow].append(t - pending.pop(e.flow))
    out = {}
    for flow in sorted(counted):
        xs = sorted(lags[flow])
        n = counted[flow]
        lag = {f"lag_ms_{name}": round(1000 * percentile(xs, q), 3) if xs else None
               for name, q in (("median", 0.5), ("p90", 0.9), ("p99", 0.99))}
        between = sum(per_ack[flow].values())
        out[flow] = {"advancing_acks": n, "prompt": round(sum(1 for x in xs if x <= prompt_s) / n, 4), **lag,
                     "unanswered": round(unanswered[flow] / n, 4),
                     "sent_per_ack": {("4+" if k == 4 else str(k)): round(per_ack[flow][k] / between, 4)
                                      for k in range(5)} if between else None}
        if flow in sibling:
            out[flow]["answered_elsewhere"] = round(elsewhere[flow] / n, 4)
    return out


#: What released a segment the sender sent (``send_causes``), in the order they are tried.
CAUSES = ("own", "own-still", "sibling", "none")


class Release(NamedTuple):
    """What released one segment the sender sent (``send_causes``)."""

    cause: str
    #: Its place among its flow's segments since that ACK (1 for the first); 0 for ``none``.
    n: int
    #: For ``own``: the sequence range the ACK newly acknowledged (from the flow's previous highest ACK to its own).
    acked: tuple[int, int] | None = None


def send_causes(acks: Sequence[AckSeen], data: Sequence[Packet], prompt_s: float = 100e-6,
                connections: Iterable[Iterable[str]] = ()) -> list[Release]:
    """For each data segment in ``data`` (one capture at the sender's interface with ``acks``: one clock), what
    released it and its place among the segments that release sent (``Release``).

    The cause is the latest ACK at most ``prompt_s`` before the segment, tried in this order: ``own``, an ACK of its
    own flow that acknowledged new data (the ACK clock); ``own-still``, an ACK of its own flow that did not (a
    duplicate ACK, or an MPTCP receiver's window or connection-level acknowledgement on that subflow); ``sibling``,
    an ACK of another subflow of its connection (``connections``: an MPTCP connection's subflows; the connection's
    scheduler hands data to whichever subflow it picks); ``none``, no ACK of those in that time (the application's
    write, a timer, a push the MPTCP layer made later). ``n`` counts the flow's segments since that ACK (1 for the
    first), 0 for ``none``. A flow's ACKs are those of its busiest connection (``data_connection``).

    At a full drop-tail FIFO a segment that replaces one that left keeps the queue as it was; one sent on another
    flow's ACK, or by no ACK at all, adds to it, as a window increase does."""
    sibling = {f: set(c) - {f} for c in map(set, connections) for f in c}
    events = sorted([(a.t, 0, (a, prev, adv)) for a, prev, adv in ack_progress(data_connection(acks))]
                    + [(p.t, 1, p) for p in data], key=lambda e: (e[0], e[1]))
    # flow -> (time of its latest ACK, the range it newly acknowledged or None, the ACK's number)
    last: dict[str, tuple[float, tuple[int, int] | None, int]] = {}
    count: dict[tuple[str, int], int] = defaultdict(int)
    out = []
    for number, (t, kind, e) in enumerate(events):
        if kind == 0:
            e, prev, advancing = e
            last[e.flow] = (t, (prev, e.ack) if advancing else None, number)
            continue
        cause, ack_id, acked = "none", None, None
        own = last.get(e.flow)
        if own is not None and t - own[0] <= prompt_s:
            cause, ack_id, acked = ("own" if own[1] else "own-still"), own[2], own[1]
        else:
            near = [last[f] for f in sibling.get(e.flow, ()) if f in last and t - last[f][0] <= prompt_s]
            if near:
                cause, ack_id = "sibling", max(near, key=lambda x: x[0])[2]
        if ack_id is None:
            out.append(Release(cause, 0))
        else:
            count[(e.flow, ack_id)] += 1
            out.append(Release(cause, count[(e.flow, ack_id)], acked))
    return out


def ack_spread(releases: Sequence[Release], data: Sequence[Packet], departures: Sequence[Packet]) -> list[float | None]:
    """For each segment in ``data`` its own ACK released (``send_causes``): how long the FIFO took to send the
    segments that ACK acknowledged, from the departure of the first to that of the last (s; None where a segment
    is not in ``departures`` or the release was not ``own``).

    With delayed ACKs each ACK acknowledges two segments and releases two. At a full drop-tail FIFO the first of
    them replaces the first segment acknowledged, one spread later than an ACK per segment would have; meanwhile
    the place that segment's departure freed is open to any arrival, a window increase of any flow. So the longer
    the spread, the likelier the pair's second segment meets a FIFO with no room. Segments the sender sent together
    leave the FIFO together; an ACK that covers segments of two sendings (``ack_pairing``) has a long spread, the
    longer the smaller its flow's share of the FIFO."""
    start: dict[tuple[str, int], float] = {}
    end: dict[tuple[str, int], float] = {}
    for p in departures:
        start.setdefault((p.flow, p.seq % 2**32), p.t)
        end.setdefault((p.flow, p.end % 2**32), p.t)
    out: list[float | None] = []
    for p, r in zip(data, releases):
        if r.cause != "own" or r.acked is None:
            out.append(None)
            continue
        t0, t1 = start.get((p.flow, r.acked[0] % 2**32)), end.get((p.flow, r.acked[1] % 2**32))
        out.append(t1 - t0 if t0 is not None and t1 is not None and t1 >= t0 else None)
    return out


def ack_pairing(acks: Sequence[AckSeen], data: Sequence[Packet], since: float = 0.0,
                together_s: float = 200e-6) -> dict[str, dict]:
    """Which segments each advancing ACK acknowledged, from one capture at the sender's interface: per flow, the
    share of its advancing ACKs at or after ``since`` that acknowledged 1, 2, or 3 or more segments, and of those
    that acknowledged two or more, the share whose segments the sender had not sent together (their first sendings
    more than ``together_s`` apart: ``straddling``).

    A delayed-ACK receiver acknowledges every second segment. While the sender answers each ACK with two segments,
    each ACK covers one pair the sender sent together; one ACK of a single segment (a quick ACK, a window update
    that carries new data's acknowledgement) shifts that, and every later ACK covers the second segment of one pair
    and the first of the next, until another odd ACK shifts it back. Such a straddling ACK's segments left the FIFO
    apart (``ack_spread``). ACKs whose range does not run along the flow's sent segments (a segment not seen) are
    left out."""
    acks = data_connection(acks)
    sent = first_seen(data)
    counts: dict[str, Counter] = defaultdict(Counter)
    for a, prev, advancing in ack_progress(acks):
        if not advancing or a.t < since:
            continue
        segs = sent.get(a.flow, {})
        covered = _along(segs, prev, a.ack, 64)
        if not covered:
            continue
        times = [segs[q][1] for q in covered]
        n = len(times)
        c = counts[a.flow]
        c["acks"] += 1
        c["1" if n == 1 else "2" if n == 2 else "3+"] += 1
        if n >= 2:
            c["straddling"] += max(times) - min(times) > together_s
    out = {}
    for flow, c in sorted(counts.items()):
        multi = c["2"] + c["3+"]
        out[flow] = {"acks": c["acks"], **{f"segments_{k}": round(c[k] / c["acks"], 4) for k in ("1", "2", "3+")},
                     "straddling": round(c["straddling"] / multi, 4) if multi else None}
    return out


def train_alignment(acks: Sequence[AckSeen], data: Sequence[Packet], since: float = 0.0,
                    together_s: float = 200e-6) -> dict[str, dict]:
    """Whether a straddling ACK is set by the window's parity, from one capture at the sender's interface.

    A sender answering an ACK that acknowledged up to A sends its *train* (segments sent together: first sendings
    within ``together_s`` of the previous) right after the k segments still in flight. A receiver that acknowledges
    every second segment from A on starts a new ACK at the train's first segment if k is even, and at the train's
    second if k is odd: then every ACK covers the end of one train and the start of the next (``ack_pairing``'s
    straddling ACKs) until the window's parity or the receiver's count changes. So where the receiver keeps its
    count, the parity of k, taken when the train was sent, foretells whether the ACK that covers the train's first
    segment starts there.

    Per flow, over trains whose first segment was first sent at or after ``since``: the trains counted, the share
    with k odd, and the share of trains whose first segment starts the ACK that covers it, for k even and for k
    odd. Near 1 and near 0 mean the receiver kept its count over the round trip, and straddling follows the
    window's parity; about equal shares mean something else moved the receiver's count. Trains whose k could not
    be counted along the sent segments (a segment not seen) are left out."""
    acks = data_connection(acks)
    sent = first_seen(data)
    adv: dict[str, list[tuple[float, int, int]]] = defaultdict(list)    # flow -> (t, previous highest, ack)
    for a, prev, advancing in ack_progress(acks):
        if advancing:
            adv[a.flow].append((a.t, prev, a.ack))
    out = {}
    for flow, segs in sorted(sent.items()):
        acked = adv.get(flow, [])
        counts: Counter = Counter()
        at_time = covering = 0          # the latest advancing ACK before a train; the first one after its start
        before = None                   # the first sending before this one
        for seq, (_, t) in segs.items():
            t_before, before = before, t
            if t_before is not None and t - t_before <= together_s:
                continue                 # not a train's first segment
            while at_time < len(acked) and acked[at_time][0] < t:
                at_time += 1
            while covering < len(acked) and not _after(acked[covering][2], seq):
                covering += 1
            if t < since or at_time == 0 or covering == len(acked):
                continue
            in_flight = _along(segs, acked[at_time - 1][2], seq, 10_000)
            if in_flight is None:
                continue
            parity = "odd" if len(in_flight) % 2 else "even"
            counts[parity] += 1
            counts[f"{parity}_starts"] += acked[covering][1] == seq
        n = counts["even"] + counts["odd"]
        if n:
            out[flow] = {"trains": n, "odd": round(counts["odd"] / n, 4),
                         **{f"starts_when_{k}": round(counts[f"{k}_starts"] / counts[k], 4) if counts[k] else None
                            for k in ("even", "odd")}}
    return out


#: What made a receiver send an ACK (``receiver_acks``), in the order they are tried.
TRIGGERS = ("arrival", "sibling", "later")


def out_of_order(arrivals: Sequence[Packet], connections: Iterable[Iterable[str]]) -> dict[tuple[str, int], bool]:
    """Per segment of an MPTCP connection's subflows (``(flow, seq mod 2^32)``, data connections only, data sequence
    number known): whether, once it arrived, the connection held data beyond a gap in its data sequence. Linux keeps
    such data in the connection's out-of-order queue, charged to its receive memory; while any is there, a read
    never leaves the connection empty (``mptcp_cleanup_rbuf``'s ``rx_empty``), and what arrives into it does not
    wake the reader."""
    out: dict[tuple[str, int], bool] = {}
    mapped = data_connection([p for p in arrivals if p.dseq is not None])
    for conn in map(set, connections):
        segs = sorted((p for p in mapped if p.flow in conn), key=lambda p: p.t)
        if not segs:
            continue
        upto = min(p.dseq for p in segs)   # everything before the first byte seen counts as received
        ahead: dict[int, int] = {}         # start -> end of the data received beyond ``upto``
        for p in segs:
            end = p.dseq + (p.end - p.seq) % 2**32
            if end > upto:
                ahead[p.dseq] = max(ahead.get(p.dseq, end), end)
            while ahead and (joined := [k for k in ahead if k <= upto]):
                for k in joined:
                    upto = max(upto, ahead.pop(k))
            out[(p.flow, p.seq % 2**32)] = bool(ahead)
    return out


def receiver_acks(arrivals: Sequence[Packet], acks: Sequence[AckSeen], since: float = 0.0, prompt_s: float = 50e-6,
                  connections: Iterable[Iterable[str]] = (), sent: Sequence[Packet] = (),
                  together_s: float = 200e-6) -> dict[str, dict]:
    """What sent each ACK, from captures at the receiver's interfaces (data arriving, ACKs leaving; one clock).

    A receiver acknowledges from the softirq that takes a segment in (Linux ``__tcp_ack_snd_check``: at once when
    more than one full segment is unacknowledged and the window it would announce has not shrunk), or later: when
    the application reads (``tcp_cleanup_rbuf``; for an MPTCP connection ``mptcp_cleanup_rbuf``, which may send on
    every subflow), from the delayed-ACK timer, or, for an MPTCP subflow, when another subflow's segment moves the
    connection. Each ACK of a flow's data connection at or after ``since`` is put down to the first of:
    ``arrival``, a segment of its own flow arrived at most ``prompt_s`` before it; ``sibling``, a segment of
    another subflow of its connection (``connections``) did; ``later``, neither.

    Per flow, for the advancing ACKs (they acknowledged new data): how many, the shares of 1, 2 and 3 or more
    segments covered, the share per trigger, and for ``later`` the time since the last segment it covered arrived
    (ms: median, 90th percentile); for the ACKs that acknowledged nothing new (window updates and, on a subflow,
    connection-level acknowledgements): how many and the share per trigger; ``held``, the share of the arrivals
    that left more than one segment unacknowledged with no ACK within ``prompt_s``; and, with ``sent`` (the
    sender's data, captured on the same clock), the share of two-segment ACKs per trigger whose segments the sender
    had not sent together (``ack_pairing``'s straddling).

    PSH (``Packet.psh``): the share of the flow's arrivals that carried it (``pushed``), of its advancing ACKs whose
    last segment carried it (``ends_on_push``), and of its one-segment ACKs whose segment did (``one_segment_pushed``).
    Linux's TCP receiver acknowledges a full-sized segment with PSH as soon as the application has read everything
    (``tcp_measure_rcv_mss`` sets ``ICSK_ACK_PUSHED``; ``__tcp_cleanup_rbuf``), so a receiver that honours it ends
    its ACKs where the sender's pushes end.

    For an MPTCP connection's subflows whose segments carry their data sequence numbers (``Packet.dseq``): the share
    of their arrivals after which the connection held out-of-order data (``out_of_order``), and the share of
    one-segment ACKs among the ACKs ending on a segment after which it was in order, and out of order
    (``one_segment_after``). Such data keeps the connection's receive memory from emptying, which the subflows'
    PSH rule needs (``out_of_order()``)."""
    acks = data_connection(acks)
    sibling = {f: set(c) - {f} for c in map(set, connections) for f in c}
    segs = first_seen(arrivals)
    pushed = {(p.flow, p.seq % 2**32) for p in arrivals if p.psh}
    disorder = out_of_order(arrivals, connections)
    first_sent = first_seen(sent)
    events = sorted([(p.t, 0, p) for p in arrivals]
                    + [(a.t, 1, (a, prev, adv)) for a, prev, adv in ack_progress(acks)], key=lambda e: (e[0], e[1]))
    last_arrival: dict[str, float] = {}
    acked: dict[str, int] = {}             # flow -> the highest ACK it sent
    awaiting: dict[str, float] = {}        # flow -> time of an arrival that left more than a segment unacknowledged
    c: dict[str, Counter] = defaultdict(Counter)
    later_ms: dict[str, list[float]] = defaultdict(list)
    for t, kind, e in events:
        if kind == 0:
            last_arrival[e.flow] = t
            if t >= since:
                c[e.flow]["arrived"] += 1
                c[e.flow]["arrived_pushed"] += e.psh
                if (e.flow, e.seq % 2**32) in disorder:
                    c[e.flow]["ordered"] += 1
                    c[e.flow]["disordered"] += disorder[(e.flow, e.seq % 2**32)]
            top = acked.get(e.flow)
            if top is not None and t >= since and e.flow not in awaiting and _after(e.end % 2**32, top):
                # more than one segment's worth unacknowledged after this arrival
                if (e.end - top) % 2**32 > e.end - e.seq:
                    awaiting[e.flow] = t
            continue
        a, prev, advancing = e
        if prev is None or advancing:
            acked[a.flow] = a.ack
        if a.flow in awaiting:
            c[a.flow]["held"] += t - awaiting.pop(a.flow) > prompt_s
            c[a.flow]["awaited"] += 1
        if t < since or prev is None:
            continue
        own = last_arrival.get(a.flow)
        if own is not None and t - own <= prompt_s:
            trigger = "arrival"
        elif any(t - last_arrival.get(f, -1.0) <= prompt_s for f in sibling.get(a.flow, ())):
            trigger = "sibling"
        else:
            trigger = "later"
        if not advancing:
            c[a.flow][f"still_{trigger}"] += 1
            c[a.flow]["still"] += 1
            continue
        covered = _along(segs[a.flow], prev, a.ack, 64)
        if covered is None:
            continue
        n, last_in = len(covered), segs[a.flow][covered[-1]][1] if covered else None
        times = [first_sent[a.flow][q][1] if q in first_sent[a.flow] else None for q in covered]
        c[a.flow]["acks"] += 1
        c[a.flow][f"segments_{min(n, 3)}"] += 1
        c[a.flow]["ends_on_push"] += (a.flow, covered[-1]) in pushed
        if (a.flow, covered[-1]) in disorder:   # the connection's order once the last segment covered arrived
            state = "out_of_order" if disorder[(a.flow, covered[-1])] else "in_order"
            c[a.flow][f"after_{state}"] += 1
            c[a.flow][f"one_after_{state}"] += n == 1
        c[a.flow][trigger] += 1
        if trigger == "later":
            later_ms[a.flow].append(1000 * (t - last_in))
        if n == 2 and None not in times:
            c[a.flow][f"pairs_{trigger}"] += 1
            c[a.flow][f"straddling_{trigger}"] += abs(times[1] - times[0]) > together_s
        nxt = first_sent[a.flow].get(a.ack)
        if times and times[-1] is not None and nxt is not None:
            # The ACK ends where a train ends: the segment after it was sent apart from the last one it covers.
            c[a.flow][f"known_{min(n, 3)}"] += 1
            c[a.flow][f"ends_{min(n, 3)}"] += nxt[1] - times[-1] > together_s
        if n == 1:
            c[a.flow][f"one_{trigger}"] += 1
            c[a.flow]["one_pushed"] += (a.flow, covered[0]) in pushed
    out = {}
    for flow, k in sorted(c.items()):
        n = k["acks"]
        if not n:
            continue
        xs = sorted(later_ms[flow])
        out[flow] = {
            "acks": n, **{f"segments_{i if i < 3 else '3+'}": round(k[f"segments_{i}"] / n, 4) for i in (1, 2, 3)},
            **{f"by_{g}": round(k[g] / n, 4) for g in TRIGGERS},
            "later_ms_median": round(percentile(xs, 0.5), 3) if xs else None,
            "later_ms_p90": round(percentile(xs, 0.9), 3) if xs else None,
            "acks_still": k["still"],
            **{f"still_by_{g}": round(k[f"still_{g}"] / k["still"], 4) if k["still"] else None for g in TRIGGERS},
            "held": round(k["held"] / k["awaited"], 4) if k["awaited"] else None,
            "pushed": round(k["arrived_pushed"] / k["arrived"], 4) if k["arrived"] else None,
            "ends_on_push": round(k["ends_on_push"] / n, 4)}
        if k["ordered"]:
            out[flow]["out_of_order"] = round(k["disordered"] / k["ordered"], 4)
            out[flow]["one_segment_after"] = {
                state: round(k[f"one_after_{state}"] / k[f"after_{state}"], 4) if k[f"after_{state}"] else None
                for state in ("in_order", "out_of_order")}
        if k["segments_1"]:
            out[flow]["one_segment_by"] = {g: round(k[f"one_{g}"] / k["segments_1"], 4) for g in TRIGGERS}
            out[flow]["one_segment_pushed"] = round(k["one_pushed"] / k["segments_1"], 4)
        if sent:
            out[flow]["straddling"] = {g: round(k[f"straddling_{g}"] / k[f"pairs_{g}"], 4) if k[f"pairs_{g}"] else None
                                       for g in TRIGGERS}
            out[flow]["ends_a_train"] = {("3+" if i == 3 else str(i)): round(k[f"ends_{i}"] / k[f"known_{i}"], 4)
                                         if k[f"known_{i}"] else None for i in (1, 2, 3)}
    return out


#: Bins of ``ack_spread`` in the FIFO's service times of a full-sized packet (lower bounds).
SPREAD_BINS = (0.0, 1.5, 3.0, 6.0, 12.0)


def spread_bin(x: float) -> str:
    """The ``SPREAD_BINS`` bin of ``x``: ``lo-hi``, or ``lo+`` for the last."""
    lows = [b for b in SPREAD_BINS if x >= b] or [SPREAD_BINS[0]]
    i = SPREAD_BINS.index(lows[-1])
    return f"{SPREAD_BINS[i]:g}-{SPREAD_BINS[i + 1]:g}" if i + 1 < len(SPREAD_BINS) else f"{SPREAD_BINS[i]:g}+"


def drops_by_cause(data: Sequence[Packet], causes: Sequence[Release], arrivals: Sequence[Packet],
                   drops: Sequence[bool], since: float = 0.0, spread: Sequence[float | None] | None = None,
                   service_s: float | None = None) -> dict[str, dict]:
    """Per flow and cause (``send_causes``): how many of the segments sent at or after ``since`` there were, their
    share of the flow's, and how many of them the FIFO dropped (``arrivals``/``drops``: its two-sided capture). A
    sent segment is matched to the FIFO's next arrival of the same flow and sequence range (a retransmission is
    sent and arrives twice). ``own`` is split by the segment's place after the ACK (``own 1``, ``own 2``,
    ``own 3+``): a delayed ACK releases two, and a third where the window grew. With ``spread`` (``ack_spread``)
    and ``service_s`` (the FIFO's time for a full-sized packet), ``own 2`` is split again by the spread of the
    segments its ACK acknowledged, in service times (``own 2 spread 3-6``: ``SPREAD_BINS``)."""
    arrived: dict[tuple, list[bool]] = defaultdict(list)
    for p, d in zip(arrivals, drops):
        arrived[(p.flow, p.seq, p.end)].append(d)
    taken: dict[tuple, int] = defaultdict(int)
    counts: dict[str, Counter] = defaultdict(Counter)
    lost: dict[str, Counter] = defaultdict(Counter)
    for k, (p, (cause, n, _)) in enumerate(zip(data, causes)):
        key = (p.flow, p.seq, p.end)
        fate = arrived.get(key, [])
        i = taken[key]
        taken[key] = i + 1
        if p.t < since or i >= len(fate):
            continue
        names = [cause] + ([f"own {min(n, 3)}" + ("+" if n >= 3 else "")] if cause == "own" else [])
        if cause == "own" and n == 2 and spread is not None and service_s and spread[k] is not None:
            names.append(f"own 2 spread {spread_bin(spread[k] / service_s)}")
        for name in names:
            counts[p.flow][name] += 1
            lost[p.flow][name] += fate[i]
    out = {}
    for flow in sorted(counts):
        total = sum(counts[flow][c] for c in CAUSES)
        out[flow] = {name: {"segments": n, "share": round(n / total, 4), "dropped": lost[flow][name],
                            "drop_rate": round(lost[flow][name] / n, 5)}
                     for name, n in sorted(counts[flow].items())}
    return out


def ack_return(acks: Sequence[AckSeen], departures: Sequence[Packet], since: float = 0.0) -> dict[str, dict]:
    """How long each flow's ACKs took to come back: for every ACK at or after ``since`` that acknowledges exactly up
    to the end of a segment that left the FIFO (the flow's own data connection, as ``ack_clock`` picks it), the
    time from that segment's departure to the ACK's arrival at the sender (both captures on one clock). The base
    round trip after the FIFO is the same for every flow of one path; a receiver that holds its ACKs back, or
    sends them in bursts, shows in the spread. Per flow: ACKs matched, median, 10th and 90th percentile and the
    90-10 spread (ms)."""
    acks = data_connection(acks)
    left: dict[tuple[str, int], float] = {}
    for p in departures:
        left.setdefault((p.flow, p.end % 2**32), p.t)   # a retransmission's second departure is not the one acked
    back: dict[str, list[float]] = defaultdict(list)
    for a in acks:
        t = left.get((a.flow, a.ack)) if a.t >= since else None
        if t is not None and t < a.t:
            back[a.flow].append(a.t - t)
    out = {}
    for flow, xs in sorted(back.items()):
        xs.sort()
        p10, p50, p90 = (1000 * percentile(xs, q) for q in (0.1, 0.5, 0.9))
        out[flow] = {"acks_matched": len(xs), "return_ms_median": round(p50, 3), "return_ms_p10": round(p10, 3),
                     "return_ms_p90": round(p90, 3), "return_ms_spread": round(p90 - p10, 3)}
    return out


def data_acks(acks: Sequence[AckSeen], flows: Iterable[str], since: float = 0.0) -> dict | None:
    """The MPTCP-level acknowledgement as the sender received it, over the ACKs at or after ``since`` of the
    subflows ``flows`` (one MPTCP connection's: each connection numbers its data on its own):
    the share of them that moved it, how far it moved (bytes: median, 99th percentile, largest) and how long it
    stood still between moves (ms: median, 90th percentile, longest). The receiver acknowledges at connection level
    only what is in order across the subflows; the sender frees its send buffer and moves its connection-level
    window only then. None without DSS acknowledgements (no MPTCP ACKs seen). Only the data connection's ACKs
    count (``data_connection``), compared in their low 32 bits (a DSS ack is sent in 4 or 8 bytes)."""
    ours = set(flows)
    seen = sorted((a for a in data_connection(acks) if a.flow in ours and a.data_ack is not None and a.t >= since),
                  key=lambda a: a.t)
    if not seen:
        return None
    moves: list[tuple[float, int]] = []
    top = seen[0].data_ack
    for a in seen[1:]:
        step = (a.data_ack - top) % 2**32
        if 0 < step < 2**31:
            moves.append((a.t, step))
            top = a.data_ack
    if not moves:
        return {"acks": len(seen), "moved": 0.0}
    steps = sorted(b for _, b in moves)
    still = sorted(b[0] - a[0] for a, b in zip(moves, moves[1:])) or [0.0]
    return {"acks": len(seen), "moved": round(len(moves) / len(seen), 4),
            "step_bytes_median": percentile(steps, 0.5), "step_bytes_p99": percentile(steps, 0.99),
            "step_bytes_max": steps[-1], "still_ms_median": round(1000 * percentile(still, 0.5), 3),
            "still_ms_p90": round(1000 * percentile(still, 0.9), 3), "still_ms_max": round(1000 * still[-1], 3)}


def dropped(arrivals: Sequence[Packet], departures: Iterable[Packet], max_sojourn_s: float) -> list[bool]:
    """For each arrival (in time order), whether it never left: no departure of the same segment (flow,
    sequence range) within ``max_sojourn_s`` after it that an earlier arrival had not already claimed.
    A retransmitted segment arrives twice and leaves once: the first arrival is the one dropped, as long as the
    retransmission leaves more than ``max_sojourn_s`` after the original arrived. It does at a FIFO of a BDP or
    more: its duplicate ACKs need a base RTT and a full FIFO's wait, and it waits in the FIFO again. At a
    shallow FIFO with no delay the two can swap, which moves a drop's time by about an RTT, not the count."""
    left: dict[tuple, list[float]] = defaultdict(list)
    for p in departures:
        left[(p.flow, p.seq, p.end)].append(p.t)
    for times in left.values():
        times.sort()
    used: dict[tuple, int] = defaultdict(int)
    out = []
    for p in arrivals:
        key = (p.flow, p.seq, p.end)
        times, i = left.get(key, []), used[key]
        # A departure before this arrival belongs to nothing later either: skip past it.
        while i < len(times) and times[i] < p.t:
            i += 1
        if i < len(times) and times[i] <= p.t + max_sojourn_s:
            used[key] = i + 1
            out.append(False)
        else:
            used[key] = i
            out.append(True)
    return out


def trains(times: Sequence[float], gap_s: float) -> list[int]:
    """For each of one flow's arrival times (sorted), the length of the train it is in (gaps < ``gap_s``)."""
    lengths: list[int] = []
    start = 0
    for i in range(1, len(times) + 1):
        if i == len(times) or times[i] - times[i - 1] >= gap_s:
            lengths += [i - start] * (i - start)
            start = i
    return lengths


def loss_events(drop_times: Sequence[float], rtt_s: float) -> int:
    """Drops of one flow grouped into congestion events: a drop more than one RTT after the event's first starts one."""
    events, start = 0, None
    for t in sorted(drop_times):
        if start is None or t - start > rtt_s:
            events, start = events + 1, t
    return events


def episodes(arrivals: Sequence[Packet], drops: Sequence[bool], rtt_s: float,
             since: float = 0.0) -> list[dict[str, int]]:
    """The FIFO's overflow episodes (drops of any flow within one RTT of the episode's first drop), each as
    {flow: drops}: whether an overflow hits every flow, as a synchronised drop-tail queue's does, or some."""
    out: list[dict[str, int]] = []
    start = None
    for p in sorted((p for p, d in zip(arrivals, drops) if d and p.t >= since), key=lambda p: p.t):
        if start is None or p.t - start > rtt_s:
            out.append({})
            start = p.t
        out[-1][p.flow] = out[-1].get(p.flow, 0) + 1
    return out


def episode_shares(eps: list[dict[str, int]], flows: Iterable[str]) -> dict[str, dict]:
    """Per flow: the episodes it lost packets in, those it alone lost in, and its drops per episode it lost in."""
    out = {}
    for f in flows:
        hit = [e for e in eps if f in e]
        out[f] = {"episodes_hit": len(hit), "episodes_alone": sum(1 for e in hit if len(e) == 1),
                  "drops_per_episode_hit": sum(e[f] for e in hit) / len(hit) if hit else None}
    return out


def backlog_at_arrivals(arrivals: Sequence[Packet], drops: Sequence[bool], departures: Sequence[Packet]) -> list[int]:
    """For each arrival (in time order), the packets in the FIFO just before it: those that arrived, were kept
    and had not yet left. Which flows' packets meet a full FIFO is which flows' packets it drops."""
    kept = sorted(p.t for p, d in zip(arrivals, drops) if not d)
    left = sorted(p.t for p in departures)
    return [bisect.bisect_left(kept, p.t) - bisect.bisect_left(left, p.t) for p in arrivals]


def backlog_by_flow(arrivals: Sequence[Packet], backlog: Sequence[int], fifo_packets: float,
                    since: float = 0.0) -> dict[str, dict]:
    """Per flow: the mean FIFO backlog its packets met (a fraction of the FIFO), and the share of its packets that
    met it at least 95 % full."""
    by_flow: dict[str, list[int]] = defaultdict(list)
    for p, q in zip(arrivals, backlog):
        if p.t >= since:
            by_flow[p.flow].append(q)
    return {f: {"backlog_met": sum(qs) / len(qs) / fifo_packets,
                "met_full": sum(1 for q in qs if q >= 0.95 * fifo_packets) / len(qs)}
            for f, qs in sorted(by_flow.items())}


def since_departure(arrivals: Sequence[Packet], departures: Sequence[Packet]) -> list[float | None]:
    """For each arrival, the time since the FIFO's last departure before it (None before the first). At a full
    drop-tail FIFO each departure frees room for one packet: the first arrival after it takes the room and any
    later one before the next departure is dropped, so where in that interval a flow's packets tend to come
    decides who loses (the phase effect of Floyd and Jacobson, "On traffic phase effects in packet-switched
    gateways", 1992)."""
    left = sorted(p.t for p in departures)
    out: list[float | None] = []
    for p in arrivals:
        i = bisect.bisect_left(left, p.t)
        out.append(p.t - left[i - 1] if i else None)
    return out


def came_after(arrivals: Sequence[Packet], since_dep: Sequence[float | None]) -> list[str | None]:
    """For each arrival (in time order), the flow of the arrival just before it if that one came after the
    FIFO's last departure too (both in one interval between departures), else None: the arrival was the first
    since the FIFO last sent, the one a full FIFO has room for. ``since_dep``: ``since_departure``'s times."""
    return [arrivals[k - 1].flow if k and (g is None or arrivals[k - 1].t > p.t - g) else None
            for k, (p, g) in enumerate(zip(arrivals, since_dep))]


def phase_by_flow(arrivals: Sequence[Packet], drops: Sequence[bool], backlog: Sequence[int],
                  since_dep: Sequence[float | None], fifo_packets: float, service_s: float,
                  since: float = 0.0, after: Sequence[str | None] | None = None) -> dict[str, dict]:
    """Per flow, over its arrivals from ``since`` that met the FIFO at least 95 % full: how far into the
    interval between departures they came (median, in packet service times), and the share dropped of those
    that came in the first half of an interval and of those in the second half. With ``after``
    (``came_after``): the share that came behind another arrival in the same interval, the share dropped of
    those that came first and of those that came behind, and whose packet they came behind (counts)."""
    rows: dict[str, list[tuple[float, bool, str | None]]] = defaultdict(list)
    behind = after if after is not None else [None] * len(arrivals)
    for p, d, q, g, a in zip(arrivals, drops, backlog, since_dep, behind):
        if p.t >= since and g is not None and q >= 0.95 * fifo_packets:
            rows[p.flow].append((g / service_s, d, a))
    out = {}
    for flow, xs in sorted(rows.items()):
        early = [d for g, d, _ in xs if g < 0.5]
        late = [d for g, d, _ in xs if g >= 0.5]
        phases = sorted(g for g, _, _ in xs)
        out[flow] = {"full_arrivals": len(xs), "phase_median": round(phases[len(phases) // 2], 3),
                     "dropped_early": _share(early), "dropped_late": _share(late)}
        if after is not None:
            first = [d for _, d, a in xs if a is None]
            later = [d for _, d, a in xs if a is not None]
            out[flow].update({"behind_another": round(len(later) / len(xs), 4), "dropped_first": _share(first),
                              "dropped_behind": _share(later),
                              "behind_whom": dict(sorted(Counter(a for _, _, a in xs if a is not None).items()))})
    return out


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def percentile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(q * len(s)))]) if s else 0.0


def flow_report(arrivals: Sequence[Packet], drops: Sequence[bool], gap_s: float, rtt_s: float,
                since: float = 0.0) -> dict[str, dict]:
    """Per flow, over the arrivals at or after ``since``: packets, drops, loss events, their rates per packet,
    trains (mean over packets, 95th percentile), and the mean train a drop fell in."""
    by_flow: dict[str, list[tuple[Packet, bool]]] = defaultdict(list)
    for p, d in zip(arrivals, drops):
        by_flow[p.flow].append((p, d))
    out = {}
    for flow, rows in sorted(by_flow.items()):
        rows.sort(key=lambda r: r[0].t)
        lengths = trains([p.t for p, _ in rows], gap_s)
        kept = [(p, d, n) for (p, d), n in zip(rows, lengths) if p.t >= since]
        if not kept:
            continue
        n = len(kept)
        drop_trains = [ln for _, d, ln in kept if d]
        events = loss_events([p.t for p, d, _ in kept if d], rtt_s)
        out[flow] = {
            "packets": n,
            "drops": len(drop_trains),
            "drops_per_packet": len(drop_trains) / n,
            "loss_events": events,
            "events_per_1k_packets": 1000 * events / n,
            "train_mean": sum(ln for _, _, ln in kept) / n,
            "train_p95": percentile([ln for _, _, ln in kept], 0.95),
            "train_of_drops_mean": sum(drop_trains) / len(drop_trains) if drop_trains else None,
        }
    return out


class Capture:
    """tcpdumps in ``host``'s namespace, one per side, each writing ``directory/<side>.pcap``.

    ``Capture(host, dev_in, dev_out, src, directory)``: data from ``src`` arriving on ``dev_in`` (side ``in``) and
    leaving by ``dev_out`` (side ``out``), the two sides of a FIFO. ``Capture.at_sender``: the sender's own
    interface, its data leaving (``data``) and the ACKs arriving (``acks``)."""

    def __init__(self, host: NamespaceHost, dev_in: str, dev_out: str, src: str, directory: str) -> None:
        self._setup(host, directory, {"in": lambda path: capture_argv(dev_in, "in", path, src),
                                      "out": lambda path: capture_argv(dev_out, "out", path, src)})

    @classmethod
    def at_sender(cls, host: NamespaceHost, dev: str, src: str, directory: str) -> Capture:
        cap = cls.__new__(cls)
        cap._setup(host, directory, {"data": lambda path: capture_argv(dev, "out", path, src),
                                     "acks": lambda path: ack_capture_argv(dev, path, src)})
        return cap

    @classmethod
    def at_receiver(cls, host: NamespaceHost, devs: Sequence[str], peer: str, directory: str) -> Capture:
        """The receiver's own interfaces: on each of ``devs`` (side named by it) the data arriving from ``peer`` and
        the ACKs leaving for it (``read`` and ``read_acks`` of that side)."""
        cap = cls.__new__(cls)
        cap._setup(host, directory, {dev: lambda path, dev=dev: _tcpdump_argv(dev, "inout", path, f"tcp and host {peer}")
                                     for dev in devs})
        return cap

    def _setup(self, host: NamespaceHost, directory: str, argv_of: dict) -> None:
        self.host = host
        self.paths = {side: f"{directory}/{side}.pcap" for side in argv_of}
        self._argv = {side: build(self.paths[side]) for side, build in argv_of.items()}
        self._procs: dict[str, BackgroundProcess] = {}
        #: Packets each tcpdump said the kernel dropped (None: it did not say).
        self.kernel_drops: dict[str, int | None] = {}

    def __enter__(self) -> Capture:
        for side, argv in self._argv.items():
            self._procs[side] = self.host.start(argv, label=f"tcpdump-{side}")
            # tcpdump opens its file once the capture is active: before that, packets would go unseen.
            wait_until(lambda path=self.paths[side]: Path(path).exists(), 10, f"tcpdump on {argv[2]} ({side})",
                       proc=self._procs[side])
        return self

    def __exit__(self, *exc) -> None:
        for side, p in self._procs.items():
            res = p.stop(grace_s=5.0)
            self.kernel_drops[side] = kernel_drops(res.stderr or "")
        self._procs = {}

    def read(self, side: str, flow_of) -> list[Packet]:
        """The side's data segments in time order."""
        return sorted(parse(self._text(side), flow_of), key=lambda p: p.t)

    def read_acks(self, side: str, flow_of) -> list[AckSeen]:
        """The side's ACKs in time order (``flow_of(dst_port, src_addr)``)."""
        return sorted(parse_acks(self._text(side), flow_of), key=lambda a: a.t)

    def _text(self, side: str) -> str:
        return self.host.run(read_argv(self.paths[side]), check=False).stdout
