"""The multipath-tcp.org kernel's coupled congestion controls, transliterated into Python.

A model of ``mptcp_coupled.c`` (LIA), ``mptcp_olia.c``, ``mptcp_balia.c`` and ``mptcp_wvegas.c``
(multipath-tcp.org v0.9x), and of Linux's single-path ``tcp_vegas.c`` (the competitor wVegas is
measured against), written from their source, not from mplab's: the same fixed point
(scales, truncating divisions, u64 wrap-around), RTTs in the unit the kernel keeps
``tp->srtt_us`` in (microseconds << 3), and each module's per-ACK (``cong_avoid``), per-loss
(``ssthresh``, ``set_state``) and per-RTT (wVegas' round) updates.

``Choices`` names the places where mplab departs from the reference on purpose
(docs/congestion-control.md says why). ``Choices.reference()`` is the reference verbatim;
``Choices()`` (the default) is what mplab implements. The replay (``harness.cc.replay``)
drives this model and mplab's C arithmetic with identical events and compares the windows.
"""
from __future__ import annotations

from dataclasses import dataclass

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1

LIA_SCALE_NUM, LIA_SCALE_DEN, LIA_SCALE = 32, 10, 12
OLIA_SCALE = 10
BALIA_RATE_LIMIT, BALIA_SCALE_NUM, BALIA_ALPHA_SCALE = 25, 5, 10
WVEGAS_SCALE = 16
WVEGAS_INITIAL_ALPHA, WVEGAS_TOTAL_ALPHA, WVEGAS_GAMMA = 2, 10, 1


@dataclass(frozen=True)
class Choices:
    """mplab's deliberate departures from the reference (True: mplab's way)."""

    #: Count ACKed packets (``acked``), not calls of cong_avoid (the reference predates stretch-ACK
    #: handling; RFC 6356 counts bytes). With one packet per ACK the two agree except for LIA's
    #: and BALIA's off-by-one: the reference increases after threshold + 1 calls.
    count_packets: bool = True
    #: Slow start while cwnd < ssthresh (tcp_in_slow_start), where LIA, BALIA and wVegas test
    #: ``<=``: with the kernel's tcp_slow_start stopping at ssthresh, ``<=`` never leaves it.
    slow_start_lt: bool = True
    #: wVegas: no backoff when the queueing delay is zero (the reference's ``0 >= 2 * 0`` halves the window).
    wvegas_no_zero_backoff: bool = True

    @classmethod
    def reference(cls) -> Choices:
        return cls(False, False, False)


@dataclass
class Win:
    """The tcp_sock fields the updates read and write (struct mplab_win)."""

    cwnd: int
    ssthresh: int
    cnt: int = 0
    clamp: int = U32 >> 1
    olia_cnt: int = 0
    mss: int = 1448


@dataclass
class Sf:
    """A subflow as the other subflows see it (struct mplab_sf)."""

    cwnd: int
    srtt: int              # tp->srtt_us: microseconds << 3
    loss_int: int = 0      # OLIA: max of the last two inter-loss byte counts
    rate: int = 0          # wVegas: instant rate, 2^-16 packets per microsecond
    sampling: int = 0      # wVegas: has RTT samples this round
    present: bool = True   # holds a slot

    def active(self) -> bool:
        return self.present and self.cwnd > 0 and self.srtt > 0


def _in_slow_start(w: Win, ch: Choices) -> bool:
    return w.cwnd < w.ssthresh if ch.slow_start_lt else w.cwnd <= w.ssthresh


def slow_start(w: Win, acked: int) -> int:
    """tcp_slow_start (Linux >= 4.3): up to ssthresh; returns the packets left over."""
    cwnd = min(w.cwnd + acked, w.ssthresh)
    acked -= cwnd - w.cwnd
    w.cwnd = min(cwnd, w.clamp)
    return acked


def cong_avoid_ai(w: Win, n: int, acked: int) -> None:
    """tcp_cong_avoid_ai: +1 packet per ``n`` packets ACKed."""
    n = max(n, 1)
    if w.cnt >= n:
        w.cnt = 0
        w.cwnd += 1
    w.cnt = (w.cnt + acked) & U32
    if w.cnt >= n:
        delta = w.cnt // n
        w.cnt -= delta * n
        w.cwnd += delta
    w.cwnd = min(w.cwnd, w.clamp)


def reno(w: Win, acked: int) -> None:
    """tcp_reno_cong_avoid on a cwnd-limited socket."""
    if w.cwnd < w.ssthresh:
        acked = slow_start(w, acked)
        if not acked:
            return
    cong_avoid_ai(w, w.cwnd, acked)


def reno_ssthresh(cwnd: int) -> int:
    return max(cwnd >> 1, 2)


def _count_step(w: Win, thr: int, acked: int, ch: Choices) -> None:
    """The linked increase's counter: the reference's per-call test, or per ACKed packet."""
    if ch.count_packets:
        cong_avoid_ai(w, thr, acked)
        return
    if w.cnt >= thr:
        if w.cwnd < w.clamp:
            w.cwnd += 1
        w.cnt = 0
    else:
        w.cnt += 1


# ---------------------------------------------------------------- LIA (mptcp_coupled.c)

def lia_alpha(sfs: list[Sf]) -> tuple[int, int]:
    """mptcp_ccc_recalc_alpha: (alpha, subflows that can send)."""
    act = [s for s in sfs if s.active()]
    if len(act) <= 1:
        return 1, len(act)
    max_num = best_cwnd = best_rtt = 0
    for s in act:
        tmp = (s.cwnd << LIA_SCALE_NUM) // ((s.srtt * s.srtt) & U64)
        if tmp >= max_num:
            max_num, best_cwnd, best_rtt = tmp, s.cwnd, s.srtt
    total = 0
    for s in act:
        total = (total + (((s.cwnd << LIA_SCALE_DEN) * best_rtt) & U64) // s.srtt) & U64
    total = (total * total) & U64
    if not total:
        return 1, len(act)
    return max((best_cwnd << LIA_SCALE_NUM) // total, 1), len(act)


def lia_ai_cnt(sfs: list[Sf], cwnd: int) -> int:
    """The ACKs per +1 packet mptcp_ccc_cong_avoid waits for: max((1 << 12) / alpha, cwnd)."""
    alpha, n = lia_alpha(sfs)
    if n <= 1:
        return cwnd
    return max((1 << LIA_SCALE) // alpha, cwnd)


def lia_on_ack(w: Win, sfs: list[Sf], me: int, acked: int, ch: Choices = Choices()) -> None:
    """mptcp_ccc_cong_avoid on a cwnd-limited subflow (alpha from the windows as they are now)."""
    if _in_slow_start(w, ch):
        slow_start(w, acked)
        return
    _count_step(w, lia_ai_cnt(sfs, w.cwnd), acked, ch)


# ---------------------------------------------------------------- OLIA (mptcp_olia.c)

def olia_epsilon(sfs: list[Sf], me: int) -> tuple[int, int]:
    """mptcp_get_epsilon for subflow ``me``: (epsilon_num, epsilon_den)."""
    act = [i for i, s in enumerate(sfs) if s.active()]
    n = len(act)
    max_cwnd = max((sfs[i].cwnd for i in act), default=0)
    best_int, best_rtt = 0, 1
    for i in act:
        tmp_rtt = (sfs[i].srtt * sfs[i].srtt) & U64
        tmp_int = sfs[i].loss_int
        if (tmp_int * best_rtt) & U64 >= (best_int * tmp_rtt) & U64:
            best_rtt, best_int = tmp_rtt, tmp_int

    def is_best(s: Sf) -> bool:
        return (s.loss_int * best_rtt) & U64 == (best_int * ((s.srtt * s.srtt) & U64)) & U64

    n_m = sum(1 for i in act if sfs[i].cwnd == max_cwnd)
    n_bm = sum(1 for i in act if sfs[i].cwnd != max_cwnd and is_best(sfs[i]))
    if not n_bm:
        return 0, 1
    m = sfs[me]
    if m.cwnd < max_cwnd and is_best(m):
        return 1, (n * n_bm) & U32
    if m.cwnd == max_cwnd:
        return -1, (n * n_m) & U32
    return 0, 1


def olia_inc(sfs: list[Sf], me: int, cwnd: int) -> int:
    """The change of mptcp_snd_cwnd_cnt in one call of mptcp_olia_cong_avoid (2^-10 packets, signed)."""
    num, den = olia_epsilon(sfs, me)
    rate = 1
    for s in sfs:
        if s.active():
            rate = (rate + (((s.cwnd << OLIA_SCALE) * sfs[me].srtt) & U64) // s.srtt) & U64
    rate = (rate * rate) & U64
    cs = cwnd << OLIA_SCALE
    inc_den = (((den * cwnd) & U32) * rate) & U64 or 1
    sq = (den * cs * cs) & U64
    if num == -1:
        if sq < rate:
            return -((((rate - sq) << OLIA_SCALE) & U64) // inc_den)
        return (((sq - rate) << OLIA_SCALE) & U64) // inc_den
    inc_num = (num * rate + sq) & U64
    return ((inc_num << OLIA_SCALE) & U64) // inc_den


def olia_on_ack(w: Win, sfs: list[Sf], me: int, acked: int, ch: Choices = Choices()) -> None:
    """mptcp_olia_cong_avoid on a cwnd-limited subflow: the counter, then a +1/-1 packet step."""
    if w.cwnd < w.ssthresh:   # the reference's OLIA uses tcp_in_slow_start
        slow_start(w, acked)
        return
    inc = olia_inc(sfs, me, w.cwnd) * (acked if ch.count_packets else 1)
    cnt = w.olia_cnt + inc
    if cnt >= (1 << OLIA_SCALE) - 1:
        if w.cwnd < w.clamp:
            w.cwnd += 1
        w.olia_cnt = 0
    elif cnt <= -(1 << OLIA_SCALE) + 1:
        w.cwnd = max(1, w.cwnd - 1)
        w.olia_cnt = 0
    else:
        w.olia_cnt = cnt


def olia_on_loss(loss1: int, loss2: int, loss3: int, retransmits: int = 0) -> tuple[int, int]:
    """mptcp_olia_set_state on Loss/Recovery/CWR: (loss1, loss2) after the markers shift."""
    if loss3 != loss2 and not retransmits:
        return loss2, loss3
    return loss1, loss2


def olia_loss_int(loss1: int, loss2: int, loss3: int) -> int:
    return max((loss3 - loss2) & U32, (loss2 - loss1) & U32)


# ---------------------------------------------------------------- BALIA (mptcp_balia.c)

def balia_params(sfs: list[Sf], me: int, cwnd: int, mss: int) -> tuple[int, int]:
    """mptcp_balia_recalc_ai for subflow ``me``: (ai, md); (0, 0) with one subflow."""
    act = [i for i, s in enumerate(sfs) if s.active()]
    if len(act) <= 1:
        return 0, 0

    def x(s: Sf) -> int:
        return ((mss * s.cwnd * (1_000_000 << 3)) & U64) // s.srtt

    max_rate = rate = total = 0
    for i in act:
        tmp = x(sfs[i])
        total = (total + tmp) & U64
        if i == me:
            rate = tmp
        if tmp >= max_rate:
            max_rate = tmp
    if not rate:
        return 0, 0
    alpha = max_rate // rate
    k = 0
    while max_rate > (1 << BALIA_RATE_LIMIT):
        max_rate >>= BALIA_SCALE_NUM
        k += 1
    if k:
        total = sum(x(sfs[i]) >> (BALIA_SCALE_NUM * k) for i in act) & U64
        rate >>= BALIA_SCALE_NUM * k
    total = (total * total) & U64
    ai = ((total * 10) & U64) // (rate + max_rate)
    ai = ((ai * cwnd) & U64) // ((rate << 2) + max_rate)
    ai = ai or cwnd
    md = ((cwnd >> 1) * min((alpha << BALIA_ALPHA_SCALE) & U64, (3 << BALIA_ALPHA_SCALE) >> 1)) & U64
    return ai, md >> BALIA_ALPHA_SCALE


def balia_on_ack(w: Win, sfs: list[Sf], me: int, acked: int, ch: Choices = Choices()) -> None:
    """mptcp_balia_cong_avoid on a cwnd-limited subflow (ai from the windows as they are now)."""
    if _in_slow_start(w, ch):
        slow_start(w, acked)
        return
    ai, _ = balia_params(sfs, me, w.cwnd, w.mss)
    thr = w.cwnd if not ai else min(ai, U32)
    _count_step(w, thr, acked, ch)


def balia_ssthresh(sfs: list[Sf], me: int, cwnd: int, mss: int) -> int:
    """mptcp_balia_ssthresh: cwnd - md (at least 1); Reno's with one subflow."""
    ai, md = balia_params(sfs, me, cwnd, mss)
    if not ai:
        return reno_ssthresh(cwnd)
    return max(cwnd - md, 1)   # md <= 3/4 cwnd: the reference's u32 subtraction never wraps


# ---------------------------------------------------------------- wVegas (mptcp_wvegas.c)

@dataclass
class WvState:
    """struct wvegas (the round's state)."""

    rate: int = 0
    weight: int = 1 << WVEGAS_SCALE
    base_rtt: int = 0x7FFFFFFF
    sampled_rtt: int = 0
    cnt_rtt: int = 0
    alpha: int = WVEGAS_INITIAL_ALPHA
    queue_delay: int = 0
    doing: int = 1


def wvegas_sample(st: WvState, rtt_us: int) -> None:
    """mptcp_wvegas_pkts_acked."""
    vrtt = (rtt_us + 1) & U32
    st.base_rtt = min(st.base_rtt, vrtt)
    st.sampled_rtt = (st.sampled_rtt + vrtt) & U32
    st.cnt_rtt += 1


def wvegas_weight(sfs: list[Sf], me: int, my_rate: int, prev: int) -> int:
    """mptcp_wvegas_weight: my rate over the rates of the subflows sampling this round."""
    total = 0
    for i, s in enumerate(sfs):
        if i == me:
            total += my_rate
        elif s.present and s.sampling:
            total += s.rate
    total &= U64
    if total and my_rate:
        return ((my_rate << WVEGAS_SCALE) & U64) // total
    return prev


def wvegas_diff(cwnd: int, base_rtt: int, rtt: int) -> int:
    """The subflow's packets in the queue by the round's mean RTT: cwnd (rtt - base) / rtt."""
    return (cwnd * ((rtt - base_rtt) & U32)) // rtt if rtt > base_rtt else 0


def wvegas_alpha(weight: int) -> int:
    """The subflow's alpha: total_alpha weighted by its share of the connection's rate, at least 2."""
    return max(2, ((weight * WVEGAS_TOTAL_ALPHA) & U64) >> WVEGAS_SCALE)


def wvegas_ca_step(w: Win, st: WvState, rtt: int, diff: int, ch: Choices = Choices()) -> None:
    """A congestion-avoidance round with the round's alpha (st.alpha, weighted already): +1 below it,
    -1 above it, then the backoff to base_rtt / (2 rtt) of the window when the queueing delay has
    doubled since the smallest one seen since the last backoff."""
    if diff > st.alpha:
        w.cwnd -= 1
        w.ssthresh = min(w.ssthresh, (w.cwnd - 1) & U32)
    elif diff < st.alpha:
        w.cwnd += 1
    q_delay = (rtt - st.base_rtt) & U32
    if not st.queue_delay or st.queue_delay > q_delay:
        st.queue_delay = q_delay
    if (q_delay or not ch.wvegas_no_zero_backoff) and q_delay >= 2 * st.queue_delay:
        backoff = ((st.base_rtt << WVEGAS_SCALE) // (2 * rtt)) & U32
        w.cwnd = ((w.cwnd * backoff) & U64) >> WVEGAS_SCALE
        st.queue_delay = 0


def wvegas_round(w: Win, st: WvState, sfs: list[Sf], me: int, acked: int, ch: Choices = Choices()) -> None:
    """mptcp_wvegas_cong_avoid for the ACK that ends a round (a subflow in CA_Open)."""
    if st.cnt_rtt <= 2:
        reno(w, acked)
    else:
        rtt = st.sampled_rtt // st.cnt_rtt
        target = (w.cwnd * st.base_rtt) // rtt
        diff = wvegas_diff(w.cwnd, st.base_rtt, rtt)
        if diff > WVEGAS_GAMMA and _in_slow_start(w, ch):
            w.cwnd = min(w.cwnd, (target + 1) & U32)
            w.ssthresh = min(w.ssthresh, (w.cwnd - 1) & U32)
        elif _in_slow_start(w, ch):
            slow_start(w, acked)
        else:
            if diff >= st.alpha:
                st.rate = (w.cwnd << WVEGAS_SCALE) // rtt
                st.weight = wvegas_weight(sfs, me, st.rate, st.weight)
                st.alpha = wvegas_alpha(st.weight)
            wvegas_ca_step(w, st, rtt, diff, ch)
        if w.cwnd < 2:
            w.cwnd = 2
        elif w.cwnd > w.clamp:
            w.cwnd = w.clamp
        w.ssthresh = max(w.ssthresh, (w.cwnd >> 1) + (w.cwnd >> 2))
    st.cnt_rtt = 0
    st.sampled_rtt = 0


# ---------------------------------------------------------------- Vegas (Linux net/ipv4/tcp_vegas.c)
# Single path: the competitor wVegas is measured against. Module parameters at their defaults.
VEGAS_ALPHA, VEGAS_BETA, VEGAS_GAMMA = 2, 4, 1


@dataclass
class VegasState:
    """struct vegas of tcp_vegas.h (beg_snd_nxt is the caller's: the replay ends rounds itself)."""

    base_rtt: int = 0x7FFFFFFF
    min_rtt: int = 0x7FFFFFFF
    cnt_rtt: int = 0
    doing: int = 1


def vegas_enable(st: VegasState) -> None:
    """vegas_enable: a new round of samples; baseRTT is kept (tcp_vegas_init also resets it)."""
    st.doing, st.cnt_rtt, st.min_rtt = 1, 0, 0x7FFFFFFF


def vegas_sample(st: VegasState, rtt_us: int) -> None:
    """tcp_vegas_pkts_acked: ``vrtt = rtt + 1`` into baseRTT (ever) and minRTT (this round)."""
    vrtt = (rtt_us + 1) & U32
    st.base_rtt = min(st.base_rtt, vrtt)
    st.min_rtt = min(st.min_rtt, vrtt)
    st.cnt_rtt += 1


def vegas_round(w: Win, st: VegasState, acked: int) -> None:
    """tcp_vegas_cong_avoid for the ACK that passes beg_snd_nxt, on a cwnd-limited socket in CA_Open."""
    if st.cnt_rtt <= 2:
        reno(w, acked)                        # too few samples: tcp_reno_cong_avoid
    else:
        rtt = st.min_rtt
        target = (w.cwnd * st.base_rtt) // rtt                                  # u64, do_div
        diff = ((w.cwnd * ((rtt - st.base_rtt) & U32)) & U32) // st.base_rtt   # u32 throughout
        if diff > VEGAS_GAMMA and w.cwnd < w.ssthresh:
            w.cwnd = min(w.cwnd, (target + 1) & U32)   # leave slow start at the actual rate + 1
            w.ssthresh = min(w.ssthresh, w.cwnd)       # tcp_vegas_ssthresh
        elif w.cwnd < w.ssthresh:
            slow_start(w, acked)
        elif diff > VEGAS_BETA:
            w.cwnd -= 1
            w.ssthresh = min(w.ssthresh, w.cwnd)
        elif diff < VEGAS_ALPHA:
            w.cwnd += 1
        if w.cwnd < 2:
            w.cwnd = 2
        elif w.cwnd > w.clamp:
            w.cwnd = w.clamp
        w.ssthresh = max(w.ssthresh, (w.cwnd >> 1) + (w.cwnd >> 2))   # tcp_current_ssthresh in CA_Open
    st.cnt_rtt = 0
    st.min_rtt = 0x7FFFFFFF
