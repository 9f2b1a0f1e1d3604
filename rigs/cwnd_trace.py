"""Each sending socket's congestion window, ACK by ACK, from the kernel's own tracepoints.

``tcp:tcp_probe`` fires for every segment a TCP socket in the established state receives: at a sender, each
ACK, with the socket's ``snd_cwnd``, ``ssthresh``, ``srtt`` (microseconds), ``snd_wnd`` (what the receiver's
window allows) and ``snd_nxt - snd_una`` (the bytes in flight), as they were before the kernel reads it.
``tcp:tcp_cong_state_set`` fires when the socket's congestion state changes (0 Open, 1 Disorder, 2 CWR,
3 Recovery, 4 Loss): a window reduction for loss starts with the move into Recovery or Loss. MPTCP subflows
are TCP sockets, so both fire for them too.

The tracepoints see every namespace; ``CwndTrace`` enables them in a tracefs instance of its own
(``/sys/kernel/tracing/instances/mplab-cwnd-<pid>-<n>``), filtered to the server ports the sender listens on,
with the ``mono`` clock, and removes the instance when it ends (one a crashed run left is removed by the next).

From the trace, per flow (``flow_report``): loss events and their rate, the window at each (W_max) and after
it (the reduction), how long each epoch between two loss events lasted, how long the window took to climb
back to the W_max before it, beside the time Linux Cubic's curve gives for that climb (``cubic_regain_s``:
the kernel's beta = 717/1024 and C = 410/1024 per second cubed, its fast convergence, ``net/ipv4/tcp_cubic.c``);
how often the flow was window-limited when an ACK came (its bytes in flight within one segment of its window),
and how often the receiver's window left it no room for a segment (a subflow's window is its connection's,
so a hole on one subflow can hold the other back). Cubic's own state (``epoch_start``, ``bic_K``,
``delay_min``) is not on either tracepoint: what is here is what the window did, not why Cubic chose it.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import re
import statistics
import subprocess
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
INSTANCE_PREFIX = "mplab-cwnd-"
#: Linux Cubic's constants (net/ipv4/tcp_cubic.c: beta = 717 / 1024, bic_scale = 41 -> C = 410 / 1024).
CUBIC_BETA = 717 / 1024
CUBIC_C = 410 / 1024
#: States a loss reduction starts in (include/net/tcp.h: TCP_CA_Recovery, TCP_CA_Loss).
LOSS_STATES = (3, 4)
#: Round trips per packet of Cubic's TCP-friendly estimate: 15/8 (``beta_scale >> 3``, tcp_cubic.c).
RENO_ESTIMATE_PER_PACKET = 15 / 8

#: An ACK for more segments than this is a stretch ACK (a delayed ACK covers two; the half allows short segments).
STRETCH_SEGMENTS = 2.5

#: IPv4 addresses, or IPv4-mapped ones of a dual-stack socket (iperf3's server listens on ``::``).
_PROBE = re.compile(r"\s(\d+\.\d+): tcp_probe: family=AF_INET6? src=\[?(?:::ffff:)?([\d.]+)\]?:(\d+) "
                    r"dest=\[?(?:::ffff:)?([\d.]+)\]?:(\d+) "
                    r".*?snd_nxt=0x([0-9a-f]+) snd_una=0x([0-9a-f]+) snd_cwnd=(\d+) ssthresh=(\d+) "
                    r"snd_wnd=(\d+) srtt=(\d+)")
_STATE = re.compile(r"\s(\d+\.\d+): tcp_cong_state_set: family=AF_INET6? sport=(\d+) dport=(\d+) "
                    r"saddr=([\d.]+) daddr=([\d.]+) .*?cong_state=(\d+)")

#: Names a socket: (its local port, the peer's address, the peer's port).
Socket = tuple[int, str, int]


@dataclass(frozen=True)
class Ack:
    t: float
    sock: Socket
    cwnd: int
    ssthresh: int
    in_flight: int     # bytes, snd_nxt - snd_una (mod 2^32)
    srtt_us: int
    snd_wnd: int = 0   # bytes the receiver's window allows from snd_una (for a subflow, the connection's)
    snd_una: int = 0   # as the ACK found it: tcp_probe fires before the ACK is processed


@dataclass(frozen=True)
class StateChange:
    t: float
    sock: Socket
    state: int


def parse(text: str, ports: Iterable[int]) -> tuple[list[Ack], list[StateChange]]:
    """The ACKs and state changes of sockets whose local port is one of ``ports``, from a trace's text."""
    keep = set(ports)
    acks: list[Ack] = []
    states: list[StateChange] = []
    for line in text.splitlines():
        m = _PROBE.search(line)
        if m:
            sport = int(m[3])
            if sport in keep:
                acks.append(Ack(float(m[1]), (sport, m[4], int(m[5])), int(m[8]), int(m[9]),
                                (int(m[6], 16) - int(m[7], 16)) % (1 << 32), int(m[11]), int(m[10]), int(m[7], 16)))
            continue
        m = _STATE.search(line)
        if m and int(m[2]) in keep:
            states.append(StateChange(float(m[1]), (int(m[2]), m[5], int(m[3])), int(m[6])))
    return acks, states


def name_sockets(acks: list[Ack], flow_of: Callable[[int, str], str | None]) -> dict[Socket, str]:
    """Each flow's socket: of the sockets ``flow_of(local port, peer address)`` names alike, the one with the
    most ACKs (iperf3's control connection shares its server port and, under MPTCP, its first path)."""
    counts: dict[Socket, int] = defaultdict(int)
    for a in acks:
        counts[a.sock] += 1
    best: dict[str, Socket] = {}
    for sock, n in counts.items():
        name = flow_of(sock[0], sock[1])
        if name is not None and (name not in best or n > counts[best[name]]):
            best[name] = sock
    return {sock: name for name, sock in best.items()}


def cubic_regain_s(w_max: float, after: float, last_max: float, rtt_s: float, delay_min_s: float = 0.0,
                   beta: float = CUBIC_BETA, c: float = CUBIC_C) -> float:
    """How long Linux Cubic takes from the end of a recovery, with the window at ``after``, back to ``w_max``
    (packets), when the loss left ``last_max`` as its plateau (``cubic_plateaus``), at round trip ``rtt_s``.

    The kernel's curve (``bictcp_update``): W(t) = C (t - K)^3 + origin with K = cbrt((origin - after) / C),
    origin = ``last_max`` unless the window already reached it, t from the epoch's first ACK in congestion
    avoidance taken one ``delay_min`` ahead; and its TCP-friendly estimate, which starts at ``after`` and grows
    one packet per cwnd x 15/8 packets acknowledged (``beta_scale`` = 8 (1024 + 717) / 3 / (1024 - 717) = 15
    in integers), 8/15 of a packet per round trip. The window follows whichever is higher, so the climb takes
    the shorter of the two times. Assumes the flow is window-limited throughout (Cubic does not grow otherwise).
    """
    origin = max(last_max, after)
    k = ((origin - after) / c) ** (1 / 3)
    cubic = max(0.0, k + (max(0.0, w_max - origin) / c) ** (1 / 3) - delay_min_s)
    reno = max(0.0, w_max - after) * RENO_ESTIMATE_PER_PACKET * rtt_s
    return min(cubic, reno)


def cubic_plateaus(w_maxes: Iterable[int], beta: float = CUBIC_BETA) -> list[float]:
    """The plateau (``last_max_cwnd``) each loss at these windows leaves, with fast convergence as the kernel
    does it (``bictcp_recalc_ssthresh``): a loss below the last plateau sets it to W (1 + beta) / 2."""
    out: list[float] = []
    last = 0.0
    for w in w_maxes:
        last = w * (1 + beta) / 2 if w < last else float(w)
        out.append(last)
    return out


@dataclass(frozen=True)
class Epoch:
    """From one loss reduction to the next, for one flow."""

    t: float               # when the reduction began (the move into Recovery or Loss)
    w_max: int             # the window at the last ACK before it
    after: int             # the window at the first ACK after recovery ended (back in Open)
    length_s: float | None   # to the next reduction (None: the last one)
    regain_s: float | None   # from the end of recovery until the window was back at w_max (None: never)
    srtt_s: float          # the mean smoothed RTT over the epoch


def epochs(acks: list[Ack], states: list[StateChange], sock: Socket) -> list[Epoch]:
    """``sock``'s loss epochs: each move into Recovery or Loss from a state below them starts one."""
    mine = [a for a in acks if a.sock == sock]
    moves = sorted((s for s in states if s.sock == sock), key=lambda s: s.t)
    starts: list[tuple[float, float]] = []   # (reduction began, recovery ended)
    prev = 0
    began: float | None = None
    for s in moves:
        if s.state in LOSS_STATES and prev not in LOSS_STATES:
            began = s.t
        elif s.state not in LOSS_STATES and prev in LOSS_STATES and began is not None:
            starts.append((began, s.t))
            began = None
        prev = s.state
    out: list[Epoch] = []
    for i, (began, ended) in enumerate(starts):
        before = [a for a in mine if a.t < began]
        after = [a for a in mine if a.t >= ended]
        if not before or not after:
            continue
        nxt = starts[i + 1][0] if i + 1 < len(starts) else None
        w_max = before[-1].cwnd
        stretch = [a for a in after if nxt is None or a.t < nxt]
        back = next((a.t for a in stretch if a.cwnd >= w_max), None)
        span = [a.srtt_us for a in mine if a.t >= began and (nxt is None or a.t < nxt)] or [before[-1].srtt_us]
        out.append(Epoch(began, w_max, after[0].cwnd, None if nxt is None else nxt - began,
                         None if back is None else back - ended, statistics.fmean(span) / 1e6))
    return out


def acked_segments(acks: list[Ack], seg: int) -> list[float]:
    """Segments each ACK of one socket acknowledged, in order: tcp_probe fires before an ACK is processed, so
    what an ACK moved ``snd_una`` by shows at the next one (mod 2^32; 0 for a duplicate or a window update)."""
    return [((b.snd_una - a.snd_una) % (1 << 32)) / seg for a, b in zip(acks, acks[1:])]


def flow_report(acks: list[Ack], states: list[StateChange], names: dict[Socket, str], mss: int | Mapping[str, int],
                since: float | None = None) -> dict[str, dict]:
    """Per named flow, over ACKs from ``since`` on (trace time): the mean window (packets, per ACK), how
    often the flow was window-limited at an ACK, loss epochs per second, and medians over its epochs of W_max,
    the cut (window after / W_max), the epoch's length, the climb back to W_max, the climb Linux Cubic would
    take for the same loss (``cubic_regain_s``) and their ratio epoch by epoch. The Cubic figures mean
    something only for a flow that ran Cubic.

    ``mss``: the flow's segment size in bytes (one for all, or per flow name). An MPTCP subflow's segments are
    shorter than a plain TCP flow's on the same MTU (its DSS option takes room), and a window counted as full
    against the wrong size reads as not full.
    """
    out: dict[str, dict] = {}
    for sock, name in names.items():
        theirs = [a for a in acks if a.sock == sock]
        mine = [a for a in theirs if since is None or a.t >= since]
        if not mine:
            continue
        seg = mss if isinstance(mss, int) else mss[name]
        every = epochs(theirs, states, sock)
        plateaus = cubic_plateaus(e.w_max for e in every)
        delay_min_s = min(a.srtt_us for a in theirs) / 1e6
        kept = [(e, last) for e, last in zip(every, plateaus) if since is None or e.t >= since]
        eps = [e for e, _ in kept]
        span_s = mine[-1].t - mine[0].t
        limited = sum(1 for a in mine if a.in_flight + seg >= a.cwnd * seg)
        rwnd = sum(1 for a in mine if a.in_flight + seg > a.snd_wnd)
        room = [a.cwnd - a.in_flight / seg for a in mine if a.in_flight + seg < a.cwnd * seg]
        regain = [e.regain_s for e in eps if e.regain_s is not None]
        acked = acked_segments(mine, seg)
        moving = [n for n in acked if n > 0]
        gaps = [b.t - a.t for a, b, n in zip(mine, mine[1:], acked) if n > 0]
        # Observed climb over Cubic's, epoch by epoch (only where the window did climb back).
        model = [cubic_regain_s(e.w_max, e.after, last, e.srtt_s, delay_min_s) for e, last in kept]
        pace = [e.regain_s / m for (e, _), m in zip(kept, model) if e.regain_s is not None and m > 0]
        out[name] = {
            "acks": len(mine),
            "cwnd_mean": round(statistics.fmean(a.cwnd for a in mine), 2),
            "srtt_ms_mean": round(statistics.fmean(a.srtt_us for a in mine) / 1000, 2),
            "window_limited": round(limited / len(mine), 4),
            "rwnd_limited": round(rwnd / len(mine), 4),
            # At the ACKs where it was not window-limited: how many segments its window had room for.
            "room_segments_median": _median(room),
            # What the receiver's ACKs look like: a delayed-ACK receiver acknowledges two segments at a time; an
            # ACK for more (a stretch ACK) lets the sender put that many, plus any growth, into the queue at once.
            "acked_segments_mean": round(statistics.fmean(moving), 3) if moving else None,
            "stretch_acks": round(sum(1 for n in moving if n > STRETCH_SEGMENTS) / len(moving), 4) if moving else None,
            "acks_without_progress": round((len(acked) - len(moving)) / len(acked), 4) if acked else None,
            "ack_gap_ms_median": round(statistics.median(gaps) * 1000, 3) if gaps else None,
            "loss_epochs": len(eps),
            "loss_epochs_per_s": round(len(eps) / span_s, 4) if span_s > 0 else None,
            # When each began (trace time), to see whether one flow's losses follow another's.
            "epoch_starts": [round(e.t, 4) for e in eps],
            "w_max_median": _median([e.w_max for e in eps]),
            "cut_median": _median([e.after / e.w_max for e in eps if e.w_max]),
            "epoch_s_median": _median([e.length_s for e in eps if e.length_s is not None]),
            "regain_s_median": _median(regain),
            "regained": f"{len(regain)}/{len(eps)}",
            "cubic_regain_s_median": _median(model),
            "regain_over_cubic_median": _median(pace),
        }
    return out


def follows(leader: list[float], follower: list[float], window_s: float) -> tuple[int, float]:
    """How many of ``follower``'s loss epochs began within ``window_s`` after one of ``leader``'s (at the same
    instant counts), and how many would by chance: ``leader``'s epochs, spread evenly over the stretch both
    flows were traced, would cover that share of it."""
    hits = sum(1 for t in follower if any(0 <= t - u <= window_s for u in leader))
    if not leader or not follower:
        return hits, 0.0
    span = max(leader[-1], follower[-1]) - min(leader[0], follower[0])
    covered = min(1.0, len(leader) * window_s / span) if span > 0 else 1.0
    return hits, covered * len(follower)


class CwndTrace:
    """``tcp_probe`` and ``tcp_cong_state_set`` for sockets on local ``ports``, into ``directory``/cwnd.txt."""

    _n = itertools.count()

    def __init__(self, ports: Iterable[int], directory: str, buffer_kb: int = 65536) -> None:
        self.ports = sorted(set(ports))
        self.path = Path(directory) / "cwnd.txt"
        self.instance = TRACEFS / "instances" / f"{INSTANCE_PREFIX}{os.getpid()}-{next(self._n)}"
        self.buffer_kb = buffer_kb
        #: Events the ring buffer overwrote before they were read (per CPU, summed): a trace with gaps.
        self.overrun: int | None = None

    def __enter__(self) -> CwndTrace:
        if not (TRACEFS / "instances").is_dir():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=False, capture_output=True)
        remove_stale_instances()
        self.instance.mkdir()
        ins = self.instance
        (ins / "buffer_size_kb").write_text(str(self.buffer_kb))
        (ins / "trace_clock").write_text("mono")
        ports = " || ".join(f"sport == {p}" for p in self.ports)
        for event in ("tcp_probe", "tcp_cong_state_set"):
            (ins / "events" / "tcp" / event / "filter").write_text(ports)
            (ins / "events" / "tcp" / event / "enable").write_text("1")
        return self

    def __exit__(self, *exc) -> None:
        ins = self.instance
        try:
            for event in ("tcp_probe", "tcp_cong_state_set"):
                (ins / "events" / "tcp" / event / "enable").write_text("0")
            self.path.write_text((ins / "trace").read_text())
            self.overrun = sum(_stat(p.read_text(), "overrun") for p in (ins / "per_cpu").glob("cpu*/stats"))
        finally:
            with contextlib.suppress(OSError):
                ins.rmdir()

    def read(self) -> tuple[list[Ack], list[StateChange]]:
        return parse(self.path.read_text(), self.ports)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def _stat(text: str, key: str) -> int:
    m = re.search(rf"^{key}: (\d+)", text, re.M)
    return int(m[1]) if m else 0


def remove_stale_instances() -> list[str]:
    """Remove the tracefs instances a ``CwndTrace`` of a process no longer alive left."""
    removed = []
    for ins in (TRACEFS / "instances").glob(f"{INSTANCE_PREFIX}*"):
        pid = ins.name[len(INSTANCE_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            for event in ("tcp_probe", "tcp_cong_state_set"):
                with contextlib.suppress(OSError):
                    (ins / "events" / "tcp" / event / "enable").write_text("0")
            with contextlib.suppress(OSError):
                ins.rmdir()
                removed.append(ins.name)
    return removed
