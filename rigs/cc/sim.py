"""A packet-level model of one shared bottleneck, driving the reference modules' own updates.

Why it exists: at the rig's drop-tail FIFO (rigs/bottleneck.py) the coupled algorithms
take about half a Reno flow's goodput, with random loss about one share. This model answers whether
that is what the reference arithmetic itself does under each loss process, with nothing of mplab's
BPF or of the kernel in the loop: every per-ACK and per-loss update of a coupled subflow is a call
into ``rigs/cc/oracle.py`` (the multipath-tcp.org modules transliterated).

The model: flows that always have data, each window-limited; one FIFO link of ``rate_mbit`` with a
``buffer_pkts`` limit (drop-tail) or an unlimited one with independent loss ``loss_p`` per packet;
each packet's propagation RTT on its return path. A loss is noticed when the packets behind it
are ACKed (one RTT after it would have left the queue); the first loss of a window is a congestion
event (the algorithm's ssthresh, cwnd set to it), later losses of the same window are not (as SACK
recovery does); ACKs of packets sent before the cut do not grow the window (recovery). Cubic is
Linux's tcp_cubic in floating point (beta 0.7, C 0.4, fast convergence, the TCP-friendly region).
Slow start, delayed ACKs, pacing and the retransmissions themselves are left out: goodput is
packets delivered, and a lost packet's retransmission is simply the next packet sent.

    result = simulate([FlowSpec("mptcp", "lia", 0.04), FlowSpec("mptcp", "lia", 0.04),
                       FlowSpec("tcp", "reno", 0.04)], rate_mbit=20, buffer_pkts=69, seconds=120)
    result.ratio("mptcp", "tcp")
"""
from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from rigs.cc import oracle as ref

MSS = 1448
WIRE_BYTES = 1514
COUPLED = ("lia", "olia", "balia")
SINGLE = ("reno", "cubic")
DELAY_BASED = ("wvegas", "vegas")   # per-RTT rounds of RTT samples (tcp_vegas.c's structure)


@dataclass(frozen=True)
class FlowSpec:
    """One flow: subflows of one MPTCP connection share ``conn``; ``rtt_s`` is its base round trip."""

    conn: str
    algorithm: str
    rtt_s: float


@dataclass
class _Cubic:
    """tcp_cubic's state, in packets and seconds."""

    w_max: float = 0.0
    epoch: float = -1.0
    k: float = 0.0
    origin: float = 0.0
    w_est: float = 0.0


@dataclass
class _Flow:
    spec: FlowSpec
    win: ref.Win
    srtt: int = 0                    # tp->srtt_us: microseconds << 3
    inflight: int = 0
    delivered: int = 0               # after the warm-up
    acked: int = 0                   # since the start (snd_una, in packets)
    cut_t: float = -1.0              # packets sent before this belong to a window already cut
    events: list[float] = field(default_factory=list)
    loss: list[int] = field(default_factory=lambda: [0, 0, 0])   # OLIA's loss1..3 (bytes)
    cubic: _Cubic = field(default_factory=_Cubic)
    cub_acc: float = 0.0
    wv: ref.WvState = field(default_factory=ref.WvState)       # wVegas' round
    vg: ref.VegasState = field(default_factory=ref.VegasState)  # Vegas' round
    round_start: float = 0.0         # beg_snd_nxt, as a send time: a packet sent at or after it ends the round
    recovering: bool = False         # between a cut and the first ACK of a packet sent after it (CA_Open again)
    backoffs: list[float] = field(default_factory=list)   # wVegas: rounds its queueing-delay backoff cut
    queued: int = 0                  # packets in the FIFO now
    queued_sum: int = 0              # summed at each ACK after the warm-up (the link is busy: even in time)
    queued_n: int = 0
    backoff_at: float = math.inf     # wVegas: plant one backoff at the first round end from then (an experiment)
    #: wVegas: each congestion-avoidance round end as the rule saw it: (time, diff, mean RTT - base RTT in us)
    rounds: list[tuple[float, int, int]] = field(default_factory=list)


@dataclass
class SimResult:
    """Packets delivered and congestion-event times per flow (index as the specs were given)."""

    specs: list[FlowSpec]
    delivered: list[int]
    events: list[list[float]]
    drops: int
    overflows: list[float]           # start of each drop-tail overflow episode (empty with random loss)
    seconds: float
    queued: list[float] = field(default_factory=list)     # mean packets in the FIFO per flow, after the warm-up
    backoffs: list[list[float]] = field(default_factory=list)   # wVegas' backoff times per flow
    rounds: list[list[tuple[float, int, int]]] = field(default_factory=list)   # wVegas' CA rounds per flow

    def round_means(self, conn: str) -> tuple[float, float] | None:
        """wVegas' own view of its backlog after the warm-up, as the rig's round trace gives it: the sum over
        ``conn``'s subflows of each one's mean diff (packets), and the mean of the rounds' RTT over base (ms)."""
        mine = [r for s, r in zip(self.specs, self.rounds) if s.conn == conn and r]
        if not mine:
            return None
        return (sum(sum(d for _, d, _ in r) / len(r) for r in mine),
                sum(q for r in mine for _, _, q in r) / sum(len(r) for r in mine) / 1000)

    def backlog(self, conn: str) -> float:
        return sum(q for s, q in zip(self.specs, self.queued) if s.conn == conn)

    def goodput(self, conn: str) -> int:
        return sum(d for s, d in zip(self.specs, self.delivered) if s.conn == conn)

    def ratio(self, conn: str, other: str) -> float:
        return self.goodput(conn) / max(self.goodput(other), 1)

    def events_of(self, conn: str) -> list[list[float]]:
        return [e for s, e in zip(self.specs, self.events) if s.conn == conn]


def _srtt_update(f: _Flow, rtt_s: float) -> None:
    """tcp_rtt_estimator: srtt (us << 3) moves an eighth of the way to each sample."""
    m = max(1, int(rtt_s * 1e6))
    f.srtt = m << 3 if not f.srtt else f.srtt + m - (f.srtt >> 3)


def _sfs(flows: list[_Flow], me: _Flow) -> tuple[list[ref.Sf], int]:
    """The connection's subflows as the oracle sees them, and ``me``'s index among them."""
    mine = [f for f in flows if f.spec.conn == me.spec.conn]
    sfs = [ref.Sf(cwnd=f.win.cwnd, srtt=f.srtt or 1, loss_int=ref.olia_loss_int(*f.loss),
                  rate=f.wv.rate, sampling=int(f.wv.sampled_rtt > 0)) for f in mine]
    return sfs, mine.index(me)


def _delay_based_ack(flows: list[_Flow], f: _Flow, now: float, sent: float) -> None:
    """tcp_vegas_cong_avoid / mptcp_wvegas_cong_avoid for one ACKed packet: the round's update on
    the ACK of a packet sent after the round began, slow start between rounds. Every flow here is
    window-limited, so the reference's not-cwnd-limited branch never runs."""
    w = f.win
    if sent < f.round_start:
        if w.cwnd < w.ssthresh:
            ref.slow_start(w, 1)
        return
    f.round_start = now
    if f.spec.algorithm == "vegas":
        ref.vegas_round(w, f.vg, 1)
        return
    if now >= f.backoff_at:     # the planted backoff, as mptcp_wvegas.c's (about half; the smallest delay forgotten)
        f.backoff_at, w.cwnd, f.wv.queue_delay = math.inf, max(2, w.cwnd // 2), 0
    sfs, me = _sfs(flows, f)
    before, in_ca = w.cwnd, w.cwnd >= w.ssthresh
    if in_ca and f.wv.cnt_rtt > 2:
        rtt = f.wv.sampled_rtt // f.wv.cnt_rtt
        f.rounds.append((now, ref.wvegas_diff(w.cwnd, f.wv.base_rtt, rtt), rtt - f.wv.base_rtt))
    ref.wvegas_round(w, f.wv, sfs, me, 1)
    if in_ca and w.cwnd < before - 1:     # the ±1 rule moves one packet: anything more is the backoff
        f.backoffs.append(now)


def _enable(f: _Flow, now: float) -> None:
    """set_state(TCP_CA_Open) after a recovery: a new round (vegas_enable / mptcp_wvegas_enable)."""
    f.round_start = now
    ref.vegas_enable(f.vg)
    f.wv = ref.WvState(base_rtt=f.wv.base_rtt)


def _cubic_on_ack(f: _Flow, now: float) -> None:
    """tcp_cubic's congestion avoidance for one ACKed packet (floating point)."""
    w, c = f.win, f.cubic
    if w.cwnd < w.ssthresh:
        w.cwnd += 1
        return
    if c.epoch < 0:
        c.epoch, c.w_est = now, float(w.cwnd)
        if w.cwnd < c.w_max:
            c.k, c.origin = ((c.w_max - w.cwnd) / 0.4) ** (1 / 3), c.w_max
        else:
            c.k, c.origin = 0.0, float(w.cwnd)
    t = now - c.epoch + f.srtt / 8e6
    target = c.origin + 0.4 * (t - c.k) ** 3
    cnt = w.cwnd / (target - w.cwnd) if target > w.cwnd else 100.0 * w.cwnd
    c.w_est += 3 * (1 - 0.7) / (1 + 0.7) / w.cwnd    # Reno-equivalent growth, per ACK
    if c.w_est > w.cwnd:
        cnt = min(cnt, w.cwnd / (c.w_est - w.cwnd))
    f.cub_acc += 1.0 / max(cnt, 1.0)
    while f.cub_acc >= 1.0:
        f.cub_acc -= 1.0
        w.cwnd += 1


def _cubic_cut(f: _Flow) -> int:
    c, cwnd = f.cubic, f.win.cwnd
    c.w_max = cwnd * (1 + 0.7) / 2 if cwnd < c.w_max else float(cwnd)   # fast convergence
    c.epoch = -1.0
    return max(int(cwnd * 0.7), 2)


def _on_ack(flows: list[_Flow], f: _Flow, now: float) -> None:
    """One ACKed packet's window update, by the flow's algorithm (coupled ones through the oracle)."""
    algo = f.spec.algorithm
    if algo == "reno":
        ref.reno(f.win, 1)
    elif algo == "cubic":
        _cubic_on_ack(f, now)
    elif algo == "lia":
        sfs, me = _sfs(flows, f)
        ref.lia_on_ack(f.win, sfs, me, 1)
    elif algo == "olia":
        f.loss[2] = f.acked * MSS              # mptcp_olia_cong_avoid: loss3 = snd_una
        sfs, me = _sfs(flows, f)
        ref.olia_on_ack(f.win, sfs, me, 1)
    elif algo == "balia":
        sfs, me = _sfs(flows, f)
        ref.balia_on_ack(f.win, sfs, me, 1)
    else:
        raise ValueError(f"no model of {algo!r}")


def _acked(flows: list[_Flow], f: _Flow, now: float, sent: float) -> None:
    """One ACK of a packet sent at ``sent``: the RTT sample, then the window update by the flow's algorithm
    (none for a packet sent before the last cut: recovery)."""
    _srtt_update(f, now - sent)
    f.acked += 1
    algo = f.spec.algorithm
    if algo == "vegas":      # pkts_acked: every ACK's RTT sample, in recovery too
        ref.vegas_sample(f.vg, int((now - sent) * 1e6))
    elif algo == "wvegas":
        ref.wvegas_sample(f.wv, int((now - sent) * 1e6))
    if sent < f.cut_t:
        return
    if f.recovering:
        f.recovering = False
        _enable(f, now)
    if algo in DELAY_BASED:
        _delay_based_ack(flows, f, now, sent)
    else:
        _on_ack(flows, f, now)


def _drain(flows: list[_Flow], queue: deque[tuple[float, int]], now: float) -> None:
    """Take the packets that have left the FIFO by ``now`` off it (and off their flows' counts)."""
    while queue and queue[0][0] <= now:
        flows[queue.popleft()[1]].queued -= 1


def _check(specs: list[FlowSpec], buffer_pkts: int | None, loss_p: float) -> None:
    if (buffer_pkts is None) == (loss_p <= 0):
        raise ValueError("give either buffer_pkts (drop-tail) or loss_p (random loss), not both")
    for s in specs:
        if s.algorithm not in (*COUPLED, *SINGLE, *DELAY_BASED):
            raise ValueError(f"no model of {s.algorithm!r}")


def _ssthresh(flows: list[_Flow], f: _Flow) -> int:
    """The window after a congestion event, by the flow's algorithm."""
    algo = f.spec.algorithm
    if algo == "cubic":
        return _cubic_cut(f)
    if algo == "balia":
        sfs, me = _sfs(flows, f)
        return ref.balia_ssthresh(sfs, me, f.win.cwnd, f.win.mss)
    if algo == "olia":
        f.loss[0], f.loss[1] = ref.olia_on_loss(*f.loss)
    return ref.reno_ssthresh(f.win.cwnd)


def _cut(flows: list[_Flow], f: _Flow, now: float, timeout: bool) -> bool:
    """A congestion event: the algorithm's ssthresh, the window set to it (to 1 after a timeout)."""
    th = _ssthresh(flows, f)
    f.win.ssthresh = th
    f.win.cwnd = 1 if timeout else th
    f.win.cnt = f.win.olia_cnt = 0
    f.cut_t = now
    f.recovering = True     # no round until it ends (set_state: not CA_Open)
    return timeout


def simulate(specs: list[FlowSpec], *, rate_mbit: float, buffer_pkts: int | None = None,
             loss_p: float = 0.0, seconds: float = 120.0, warmup_s: float = 20.0, seed: int = 0,
             initial_cwnd: int = 10, tick_s: float = 0.0, min_rto_s: float = 0.0,
             ack_jitter_s: float = 0.0, wvegas_backoff_at: float = math.inf) -> SimResult:
    """Run the flows through one FIFO: drop-tail at ``buffer_pkts``, or unlimited with loss ``loss_p``.

    Goodput and events are counted after ``warmup_s``. ``tick_s`` > 0 hands ACKs (and loss
    notices) back only at multiples of it, as a delay line that releases packets in batches does:
    each flow then sends in bursts, and an overflow drops from whichever flow's burst meets it.
    ``min_rto_s`` > 0: a loss in a window of fewer than 4 packets (too few for three duplicate
    ACKs) is a timeout: the flow sends nothing for ``min_rto_s``, then restarts from a window of 1.
    ``ack_jitter_s`` > 0 delays each ACK by up to that much more (uniform). ``wvegas_backoff_at``: each
    wVegas subflow takes one planted backoff (window halved, smallest delay forgotten) at its next round end.
    """
    _check(specs, buffer_pkts, loss_p)
    rng = random.Random(seed)
    service = WIRE_BYTES * 8 / (rate_mbit * 1e6)
    flows = [_Flow(s, ref.Win(cwnd=initial_cwnd, ssthresh=ref.U32 >> 1), backoff_at=wvegas_backoff_at) for s in specs]
    heap: list[tuple[float, int, int, int, float]] = []    # (time, tiebreak, kind, flow, sent at)
    queue: deque[tuple[float, int]] = deque()               # (departure time, flow) of packets in the FIFO
    state = {"free": 0.0, "n": 0, "drops": 0, "last_drop": -1.0}
    overflows: list[float] = []
    ACK, LOSS, RESUME = 0, 1, 2
    stalled = [0.0] * len(flows)

    def back(t: float) -> float:
        return math.ceil(t / tick_s) * tick_s if tick_s > 0 else t

    def send(i: int, now: float) -> None:
        f = flows[i]
        if now < stalled[i]:
            return
        while f.inflight < f.win.cwnd:
            f.inflight += 1
            state["n"] += 1
            _drain(flows, queue, now)
            dep = max(now, state["free"]) + service
            dropped = (rng.random() < loss_p) if loss_p > 0 else len(queue) >= buffer_pkts
            if dropped:
                state["drops"] += 1
                if buffer_pkts is not None and now - state["last_drop"] > f.spec.rtt_s:
                    overflows.append(now)
                state["last_drop"] = now
                heapq.heappush(heap, (back(dep + f.spec.rtt_s), state["n"], LOSS, i, now))
                continue
            state["free"] = dep
            queue.append((dep, i))
            f.queued += 1
            jitter = ack_jitter_s * rng.random() if ack_jitter_s > 0 else 0.0
            heapq.heappush(heap, (back(dep + f.spec.rtt_s + jitter), state["n"], ACK, i, now))

    for i in range(len(flows)):   # start times spread over 100 ms: the seed matters at a drop-tail FIFO too
        state["n"] += 1
        heapq.heappush(heap, (rng.uniform(0, 0.1), state["n"], RESUME, i, 0.0))
    while heap:
        now, _, kind, i, sent = heapq.heappop(heap)
        if now > seconds:
            break
        f = flows[i]
        if kind == RESUME:
            send(i, now)
            continue
        f.inflight -= 1
        if kind == ACK:
            if now >= warmup_s:
                f.delivered += 1
                _drain(flows, queue, now)
                for g in flows:     # the FIFO's contents at each ACK (the link is busy: even in time)
                    g.queued_sum += g.queued
                    g.queued_n += 1
            _acked(flows, f, now, sent)
        elif sent >= f.cut_t:
            if now >= warmup_s:
                f.events.append(now)
            if _cut(flows, f, now, timeout=min_rto_s > 0 and f.win.cwnd < 4):
                stalled[i] = now + min_rto_s
                state["n"] += 1
                heapq.heappush(heap, (stalled[i], state["n"], RESUME, i, now))
        send(i, now)
    return _result(specs, flows, state["drops"], overflows, seconds, warmup_s)


def _result(specs: list[FlowSpec], flows: list[_Flow], drops: int, overflows: list[float], seconds: float,
            warmup_s: float) -> SimResult:
    return SimResult(list(specs), [f.delivered for f in flows], [f.events for f in flows], drops,
                     [t for t in overflows if t >= warmup_s], seconds - warmup_s,
                     [f.queued_sum / max(f.queued_n, 1) for f in flows],
                     [[t for t in f.backoffs if t >= warmup_s] for f in flows],
                     [[r for r in f.rounds if r[0] >= warmup_s] for f in flows])


def synchronisation(result: SimResult, conn: str, other: str, window_s: float) -> float:
    """Of ``other``'s congestion events, the share at which every subflow of ``conn`` also took one
    within ``window_s``: near 1 when an overflow hits every flow, near the chance level with random loss."""
    mine = result.events_of(conn)
    theirs = [t for ev in result.events_of(other) for t in ev]
    if not theirs or not mine:
        return float("nan")
    hit = sum(all(any(abs(t - u) <= window_s for u in ev) for ev in mine) for t in theirs)
    return hit / len(theirs)


def loss_per_packet(result: SimResult, conn: str, other: str) -> float:
    """Congestion events per packet delivered, ``conn`` over ``other``: about 1 when losses go by
    packets sent (RFC 6356's premise), well above 1 when a slow flow's bursts meet a full FIFO as
    often as a fast flow's do."""
    def per_packet(c: str) -> float:
        return sum(len(e) for e in result.events_of(c)) / max(result.goodput(c), 1)
    return per_packet(conn) / per_packet(other) if per_packet(other) else float("nan")


def bdp_packets(rate_mbit: float, rtt_s: float) -> int:
    return max(1, math.ceil(rate_mbit * 1e6 / 8 * rtt_s / WIRE_BYTES))
