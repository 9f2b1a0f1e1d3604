"""The related papers' decision rules as pure functions: numbers in, a path set (and caps) out.

Each rule here is the arithmetic of one scheme of docs/reference/papers.md (section numbers §N there;
"ambiguity `name`" is an entry of docs/reference/ambiguities.md), with no I/O and no knowledge of
receivers, steering or records (``controller.related`` wraps them as policies):

- ``lia_rates``, ``es_mptcp`` (§2): ES-MPTCP's ranking by effective energy per bit and its
  ratio objective over the top-k subflows, with the LIA fixed point as throughput model;
  ``es_mptcp_switch``: the file size at which its choice changes, on given inputs;
- ``rounds_model``, ``ee_mptcp`` (§4): EE-MPTCP's round-based expected-window model, the two-level
  sort and its difference objective;
- ``eemptcp`` (§3): EEMPTCP's energy-efficiency-maximising rate split, by enumeration instead of a GA;
- ``mp_sdn_regulate``, ``mp_sdn_primary``, ``tier2_shares`` (§5): MP-SDN's categorisation and its
  Tier-2 AIMD loop; ``FloorWatch`` is the energy-aware variant's removal/re-admission rule;
- ``marginal_efficiency`` (§7.2): add a path iff its marginal bits per joule beat the device's.

Units: rates in Mbit/s, power in mW, energy in mJ (mW x s), so bits per joule are
``1000 * Mbit/s / mW``; RTT in seconds; loss as a probability; windows in segments (MSS).
Every ambiguity of docs/reference/ambiguities.md is resolved in the docstring of the function it touches
and collected in docs/schemes.md.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

#: The papers' linear downlink power model P = b*x + theta (mW/Mbit/s, mW): ES-MPTCP Table 2,
#: EEMPTCP §V-A, EE-MPTCP §5.1 (rounded Huang et al. 2012 coefficients; docs/reference/papers.md §6).
PAPER_POWER: dict[str, tuple[float, float]] = {"wifi": (137.0, 132.9), "lte": (52.0, 1288.0), "3g": (122.1, 817.9)}
MSS_BYTES = 1460
#: Loss floor of the LIA fixed point and the Mathis rate (ambiguity `zero-loss`: both diverge at p = 0).
P_FLOOR = 1e-4


@dataclass(frozen=True)
class PathState:
    """What a scheme knows about one path of one receiver (Mbit/s, s, probability, segments)."""

    capacity_mbit: float
    rtt_s: float | None = None
    loss: float | None = None
    cwnd_pkts: float | None = None


@dataclass(frozen=True)
class Choice:
    """A rule's answer: the paths to use, optional caps (Mbit/s), and what it weighed (for the records)."""

    paths: frozenset[str]
    caps_mbit: Mapping[str, float] | None = None
    trace: dict = field(default_factory=dict)


def power_mw(power: Mapping[str, tuple[float, float]], path: str, x_mbit: float) -> float:
    """P_r(x) = b_r x + theta_r for a path carrying x > 0 (0 for an idle path)."""
    b, theta = power[path]
    return b * x_mbit + theta if x_mbit > 0 else 0.0


def energy_per_mbit(power: Mapping[str, tuple[float, float]], path: str, x_mbit: float) -> float:
    """ES-MPTCP's ranking key b'_r = b_r + theta_r / x_r (mJ per Mbit; infinite for an idle path)."""
    b, theta = power[path]
    return b + theta / x_mbit if x_mbit > 0 else math.inf


def _mbit_per_pkt(mss_bytes: int) -> float:
    return mss_bytes * 8 / 1e6


def lia_rates(paths: Mapping[str, PathState], p_floor: float = P_FLOOR, mss_bytes: int = MSS_BYTES) -> dict[str, float]:
    """LIA's equilibrium rate per path (Mbit/s), ES-MPTCP Eqs. 6-7, each capped at the path's capacity.

    ``w_r = (1/p_r) * max_p(sqrt(2/p_p)/rtt_p) / sum_p 1/(rtt_p p_p)``, ``x_r = w_r / rtt_r``: the
    connection gets what one Reno flow gets on its best path, split in proportion to 1/p. The
    square root is restored (plain-text renderings drop it); p is floored at ``p_floor`` and x capped
    at capacity (ambiguity `zero-loss`). One path alone is plain Reno: sqrt(2/p)/rtt.
    """
    p = {r: max(s.loss or 0.0, p_floor) for r, s in paths.items()}
    rtt = {r: _rtt(s, r) for r, s in paths.items()}
    best = max(math.sqrt(2 / p[r]) / rtt[r] for r in paths)  # packets/s
    denom = sum(1 / (rtt[r] * p[r]) for r in paths)
    unit = _mbit_per_pkt(mss_bytes)
    return {r: min(unit * best / (p[r] * rtt[r] * denom), paths[r].capacity_mbit) for r in paths}


def _rtt(s: PathState, name: str) -> float:
    if not s.rtt_s or s.rtt_s <= 0:
        raise ValueError(f"path {name}: the rule needs its RTT (got {s.rtt_s!r})")
    return s.rtt_s


def bdp_pkts(s: PathState, name: str, mss_bytes: int = MSS_BYTES) -> float:
    """Bandwidth-delay product in segments (at least 1): the window cap of the round models (ambiguity `zero-loss`)."""
    return max(1.0, s.capacity_mbit * _rtt(s, name) / _mbit_per_pkt(mss_bytes))


# ---------------------------------------------------------------- ES-MPTCP (§2)


def slow_start_segments(rounds: int, w0: float, w_max: float) -> float:
    """Segments delivered in ``rounds`` RTT rounds by a window starting at ``w0``, doubling up to ``w_max``."""
    total, w = 0.0, min(w0, w_max)
    for _ in range(rounds):
        total += w
        w = min(2 * w, w_max)
    return total


def completion_rounds(segments: Mapping[str, Callable[[int], float]], rtts: Mapping[str, float], n_t: float,
                      max_rounds: int = 100_000) -> tuple[int, dict[str, int]]:
    """The round counting of EE-MPTCP Algorithm 1 (ES-MPTCP §4.3): rounds of the slowest subflow.

    ``segments[r](u)`` is what subflow r delivers in u of its own rounds. With the slowest subflow k
    at round r0, a faster subflow i has had ``u_i = floor(r0 * RTT_k / RTT_i)`` rounds (Eq. 20); r0
    grows until the set has delivered ``n_t`` segments (Eq. 21). Returns (r0, u per subflow).
    """
    slow = max(rtts, key=lambda r: rtts[r])
    for r0 in range(1, max_rounds + 1):
        # The small epsilon keeps floor() from losing a round to float error (0.065/0.013 = 4.999...).
        u = {r: (r0 if r == slow else max(1, math.floor(r0 * rtts[slow] / rtts[r] + 1e-9))) for r in rtts}
        if sum(segments[r](u[r]) for r in rtts) >= n_t:
            return r0, u
    raise ValueError(f"{n_t:.0f} segments not delivered within {max_rounds} rounds")



def es_mptcp(paths: Mapping[str, PathState], power: Mapping[str, tuple[float, float]], file_bytes: int, *,
             objective: str = "ratio", time_mode: str = "rounds", p_floor: float = P_FLOOR, w0: float = 10.0,
             mss_bytes: int = MSS_BYTES) -> Choice:
    """ES-MPTCP (§2.1): rank subflows by b'_r, take the top k* maximising O_k.

    Resolutions (ambiguities `objective-form`, `completion-time`, `zero-loss`):
      * rates: LIA fixed point over the paths *in the candidate set* (``lia_rates``), p floored, x capped at
        capacity; the ranking uses the LIA rates with every path in the set, as the paper's Eq. 8 ranks
        the connection's running subflows;
      * ``objective="ratio"`` (default): O_k = sum X / (T * sum(b X + theta)) (Eq. 1 read as a fraction,
        an energy-delay-product objective); ``"difference"`` is EE-MPTCP's form, in (Mbit/s, mJ);
      * ``time_mode="rounds"`` (default, the paper's T = r0 * RTT_slowest): each subflow starts at ``w0``
        segments and doubles per round up to its LIA window, capped at its BDP; this is what makes the
        choice depend on the file size (a short file ends in slow start, where RTT matters most);
        ``"size"``: T = S / sum X (then O_k ranks sets independently of S);
      * ties keep the smaller set (k counts up and only a strictly better O_k wins).

    Returns the chosen set with, in the trace, the ranking, b' per path, and X, T, P and O for each k.
    """
    if objective not in ("ratio", "difference"):
        raise ValueError(f"objective {objective!r}: ratio or difference")
    if time_mode not in ("rounds", "size"):
        raise ValueError(f"time_mode {time_mode!r}: rounds or size")
    live = {r: s for r, s in paths.items() if s.capacity_mbit > 0}
    if not live:
        raise ValueError("no path with a positive capacity")
    s_mbit = file_bytes * 8 / 1e6
    n_t = file_bytes / mss_bytes
    unit = _mbit_per_pkt(mss_bytes)

    def segments(r: str):
        s = live[r]
        return RoundsModel(max(s.loss or 0.0, 0.0), w0, math.inf, bdp_pkts(s, r, mss_bytes))

    def predict(subset: dict[str, PathState]) -> tuple[dict[str, float], float]:
        if time_mode == "size":
            x = lia_rates(subset, p_floor, mss_bytes)
            return x, s_mbit / sum(x.values())
        rtts = {r: _rtt(s, r) for r, s in subset.items()}
        seg = {r: segments(r) for r in subset}
        r0, u = completion_rounds(seg, rtts, n_t)
        t_s = r0 * max(rtts.values())
        return {r: seg[r](u[r]) * unit / (u[r] * rtts[r]) for r in subset}, t_s

    # The ranking's x_r: in "size" mode the LIA rates with every path running; in "rounds" mode
    # each path's own predicted average rate for this file (so a short file favours the low-RTT path).
    x_all = (lia_rates(live, p_floor, mss_bytes) if time_mode == "size"
             else {r: predict({r: live[r]})[0][r] for r in live})
    order = sorted(live, key=lambda r: (energy_per_mbit(power, r, x_all[r]), r))
    ks = []
    best_k, best_o = 1, -math.inf
    for k in range(1, len(order) + 1):
        subset = {r: live[r] for r in order[:k]}
        rates, t_s = predict(subset)
        total = sum(rates.values())
        p_mw = sum(power_mw(power, r, rates[r]) for r in subset)
        o = total / (t_s * p_mw) if objective == "ratio" else total - t_s * p_mw
        ks.append({"k": k, "paths": order[:k], "rate_mbit": rates, "time_s": t_s, "power_mw": p_mw, "objective": o})
        if o > best_o:
            best_k, best_o = k, o
    return Choice(frozenset(order[:best_k]), None,
                  {"ranking": order, "energy_per_mbit": {r: energy_per_mbit(power, r, x_all[r]) for r in order},
                   "ranking_rate_mbit": x_all, "candidates": ks, "k": best_k})


@dataclass(frozen=True)
class SizeSwitch:
    """Where ES-MPTCP's choice changes with the file size: ``below`` for files under ``at_bytes``, ``above`` from it."""

    at_bytes: int
    below: frozenset[str]
    above: frozenset[str]


def es_mptcp_switch(paths: Mapping[str, PathState], power: Mapping[str, tuple[float, float]], *,
                    lo_bytes: int = 16 * 1024, hi_bytes: int = 256 * 2**20, resolution_bytes: int = 1024,
                    **kw) -> SizeSwitch | None:
    """The smallest file size (to ``resolution_bytes``) at which ``es_mptcp`` on these inputs chooses another
    set than at ``lo_bytes``; None when it does not change up to ``hi_bytes``.

    Sizes double from ``lo_bytes`` until the set changes, then bisect between the last two. This takes
    the first change: the rule's set need not be monotonic in the size (in ``time_mode="size"`` it does
    not depend on it), so callers that rely on one switch check the sets they use against ``es_mptcp``.
    ``kw`` goes to ``es_mptcp`` (objective, time_mode, p_floor, w0, mss_bytes).
    """
    def choose(n: int) -> frozenset[str]:
        return es_mptcp(paths, power, n, **kw).paths

    below = choose(lo_bytes)
    prev, size = lo_bytes, lo_bytes
    while True:
        size = min(2 * size, hi_bytes)
        if choose(size) != below:
            break
        if size >= hi_bytes:
            return None
        prev = size
    lo, hi = prev, size  # choose(lo) == below != choose(hi)
    while hi - lo > resolution_bytes:
        mid = (lo + hi) // 2
        if choose(mid) == below:
            lo = mid
        else:
            hi = mid
    return SizeSwitch(hi, below, choose(hi))


# ---------------------------------------------------------------- EE-MPTCP (§4)


def _binom_pmf(w: int, k: int, p: float) -> float:
    return math.comb(w, k) * p**k * (1 - p) ** (w - k)


def loss_outcomes(w: float, p: float) -> tuple[float, float, float]:
    """(P0 no loss, P1 timeout, P2 fast retransmit) for a round of window ``w`` (Eqs. 10-12).

    ``binom(w, l)`` with the arguments the right way round (ambiguity `binomial`); the window is rounded to
    a whole number of segments (at least 1) for the binomial; with W <= 3 any loss is a timeout (too
    few segments left for three duplicate ACKs).
    """
    n = max(1, round(w))
    p0 = (1 - p) ** n
    if n <= 3:
        return p0, 1 - p0, 0.0
    p1 = sum(_binom_pmf(n, k, p) for k in range(n - 3, n + 1))
    p2 = sum(_binom_pmf(n, k, p) for k in range(1, n - 3))
    return p0, p1, p2


def rounds_model(rounds: int, p: float, w0: float = 10.0, ssthresh0: float = 64.0,
                 w_cap: float = math.inf) -> float:
    """EE-MPTCP's expected segments delivered in ``rounds`` RTT rounds (§4.2, Eqs. 7-18).

    Each round sends the window W and loses W*p on average; the next window is the expectation over
    no loss (W+1 above ssthresh, else 2W), a timeout (back to ``w0``, ssthresh W/2) and a fast
    retransmit (W/2, ssthresh W/2). The window is capped at ``w_cap`` (BDP / receive window,
    ambiguity `zero-loss`), without which a lossless path's window grows without bound.
    """
    return RoundsModel(p, w0, ssthresh0, w_cap)(rounds)


class RoundsModel:
    """``rounds_model`` of one path as a function of the rounds, each round computed once.

    The round counting asks for u = 1, 2, 3, ... rounds in turn; recomputing the model from round 0
    each time made it quadratic in the rounds (a 64 MiB file on the paper's links took a minute);
    this keeps the cumulative totals (the same sums in the same order, so the same numbers).
    """

    def __init__(self, p: float, w0: float = 10.0, ssthresh0: float = 64.0, w_cap: float = math.inf) -> None:
        self.p, self.w0, self.w_cap = p, w0, w_cap
        self._w, self._sst = min(w0, w_cap), ssthresh0
        self._totals = [0.0]

    def __call__(self, rounds: int) -> float:
        totals, p, w0 = self._totals, self.p, self.w0
        while len(totals) <= rounds:
            w, sst = self._w, self._sst
            totals.append(totals[-1] + (w - w * p))
            p0, p1, p2 = loss_outcomes(w, p)
            cw0 = w + 1 if w >= sst else 2 * w
            self._w, self._sst = (min(self.w_cap, p0 * cw0 + p1 * w0 + p2 * w / 2), p0 * sst + (p1 + p2) * w / 2)
        return totals[rounds]


def ee_mptcp(paths: Mapping[str, PathState], power: Mapping[str, tuple[float, float]], file_bytes: int, *,
             w0: float = 10.0, ssthresh0: float = 64.0, objective: str = "difference",
             energy_scale: float = 1.0, mss_bytes: int = MSS_BYTES) -> Choice:
    """EE-MPTCP (§4.3): rank by b'_r, then for each top-k set predict X and T by counting rounds.

    Resolutions (ambiguities `objective-units`, `completion-time`, `binomial`):
      * level 1 ranks by b'_r with x_r = cwnd/RTT when a window was measured, else the path's capacity;
      * the objective is the printed difference O_k = sum X - T * sum(b X + theta) in (Mbit/s, mJ),
        the units of the paper's constants; the energy term is divided by ``energy_scale`` (1 = as
        printed, where energy dominates); ``objective="ratio"`` gives ES-MPTCP's form;
      * T = r0 * RTT_slowest from the round counting (Algorithm 1), each subflow's window capped at its BDP;
      * a path with no measured loss is taken as lossless (the model caps its window instead);
      * ties keep the smaller set.
    """
    live = {r: s for r, s in paths.items() if s.capacity_mbit > 0}
    if not live:
        raise ValueError("no path with a positive capacity")
    unit = _mbit_per_pkt(mss_bytes)
    x1 = {r: (min(s.cwnd_pkts * unit / _rtt(s, r), s.capacity_mbit) if s.cwnd_pkts else s.capacity_mbit)
          for r, s in live.items()}
    order = sorted(live, key=lambda r: (energy_per_mbit(power, r, x1[r]), r))
    n_t = file_bytes / mss_bytes
    ks = []
    best_k, best_o = 1, -math.inf
    for k in range(1, len(order) + 1):
        subset = {r: live[r] for r in order[:k]}
        rtts = {r: _rtt(s, r) for r, s in subset.items()}
        seg = {r: RoundsModel(subset[r].loss or 0.0, w0, ssthresh0, bdp_pkts(subset[r], r, mss_bytes))
               for r in subset}
        r0, u = completion_rounds(seg, rtts, n_t)
        slow = max(rtts, key=lambda r: rtts[r])
        t_s = r0 * rtts[slow]
        rates = {r: seg[r](u[r]) * unit / (u[r] * rtts[r]) for r in subset}
        total = sum(rates.values())
        p_mw = sum(power_mw(power, r, rates[r]) for r in subset)
        o = total - t_s * p_mw / energy_scale if objective == "difference" else total / (t_s * p_mw)
        ks.append({"k": k, "paths": sorted(subset, key=lambda r: rtts[r]), "rate_mbit": rates, "rounds": r0,
                   "time_s": t_s, "power_mw": p_mw, "objective": o})
        if o > best_o:
            best_k, best_o = k, o
    return Choice(frozenset(order[:best_k]), None,
                  {"ranking": order, "energy_per_mbit": {r: energy_per_mbit(power, r, x1[r]) for r in order},
                   "candidates": ks, "k": best_k})


# ---------------------------------------------------------------- EEMPTCP (§3)

EMAX_MODES = ("max_at_aggregate", "largest_theta", "largest_b")


def mathis_mbit(rtt_s: float, loss: float, mss_bytes: int = MSS_BYTES, p_floor: float = P_FLOOR) -> float:
    """Mathis capacity MSS/(RTT sqrt(p)) * sqrt(1.5) (Mbit/s), EEMPTCP's C_r (p floored)."""
    return _mbit_per_pkt(mss_bytes) * math.sqrt(1.5) / (rtt_s * math.sqrt(max(loss, p_floor)))


def emax_mw(power: Mapping[str, tuple[float, float]], paths: Iterable[str], x_total: float, mode: str) -> float:
    """EEMPTCP's E_max(X): the power if all traffic went over the most energy-hungry path (ambiguity `energy-cap`).

    ``max_at_aggregate`` (default): max_r(theta_r + b_r X); ``largest_theta``: the path with the largest
    theta carries X; ``largest_b``: the path with the largest b carries X.
    """
    ps = list(paths)
    if mode == "max_at_aggregate":
        return max(power[r][1] + power[r][0] * x_total for r in ps)
    if mode == "largest_theta":
        r = max(ps, key=lambda r: power[r][1])
    elif mode == "largest_b":
        r = max(ps, key=lambda r: power[r][0])
    else:
        raise ValueError(f"emax_mode {mode!r}: one of {EMAX_MODES}")
    return power[r][1] + power[r][0] * x_total


def _grid(cap: float, step: float) -> list[float]:
    n = int(math.floor(cap / step + 1e-9))
    pts = [round(i * step, 9) for i in range(1, n + 1) if i * step < cap - 1e-9]
    return pts + [cap]


def eemptcp(capacity_mbit: Mapping[str, float], power: Mapping[str, tuple[float, float]], *,
            emax_mode: str = "max_at_aggregate", step_mbit: float = 0.1) -> Choice:
    """EEMPTCP (§3.1): the rate split maximising sum x / sum(theta + b x) under constraints (5)-(7).

    (5) sum x >= R = max_r C_r, (6) 0 < x_r <= C_r on the paths used, (7) power <= E_max(sum x).
    The GA of the paper (parameters not given, ambiguity `ga-parameters`) is replaced by enumeration: every
    non-empty path set, every rate on a ``step_mbit`` grid plus each capacity itself (the objective
    is linear-fractional, so its maximum sits on a vertex, and the capacities are vertices).
    C_r is whatever the caller measured (mplab: the probe rate; the paper: the Mathis rate).
    When no split satisfies the constraints (possible only with E_max readings below the fastest
    path's own power), the fastest path alone at its capacity, marked ``infeasible`` in the trace.
    """
    live = {r: c for r, c in capacity_mbit.items() if c > 0}
    if not live:
        raise ValueError("no path with a positive capacity")
    r_min = max(live.values())
    best: tuple[float, frozenset[str], dict[str, float]] | None = None
    feasible_sets = []
    for k in range(1, len(live) + 1):
        for subset in combinations(sorted(live), k):
            grids = [_grid(live[r], step_mbit) for r in subset]
            found = False
            for xs in _product(grids):
                total = sum(xs)
                if total < r_min - 1e-9:
                    continue
                p = sum(power[r][1] + power[r][0] * x for r, x in zip(subset, xs))
                if p > emax_mw(power, live, total, emax_mode) + 1e-9:
                    continue
                found = True
                ee = total / p
                if best is None or ee > best[0] + 1e-12:
                    best = (ee, frozenset(subset), dict(zip(subset, xs)))
            if found:
                feasible_sets.append(list(subset))
    if best is None:
        # Only a reading of E_max below the fastest path's own power gets here (e.g. largest_theta with
        # WiFi the fastest): the reference's reading is that the policy collapses to the faster single
        # path, so take it at its capacity and say so in the trace.
        r = max(sorted(live), key=lambda r: live[r])
        return Choice(frozenset({r}), {r: live[r]}, {"ee_mbit_per_j": 1000 * live[r] / power_mw(power, r, live[r]),
                                                    "required_mbit": r_min, "feasible_sets": [],
                                                    "emax_mode": emax_mode, "infeasible": True})
    ee, paths, caps = best
    return Choice(paths, caps, {"ee_mbit_per_j": ee * 1000, "required_mbit": r_min, "feasible_sets": feasible_sets,
                                "emax_mode": emax_mode, "infeasible": False})


def _product(grids: Sequence[list[float]]):
    if not grids:
        yield ()
        return
    for x in grids[0]:
        for rest in _product(grids[1:]):
            yield (x, *rest)


# ---------------------------------------------------------------- MP-SDN (§5)


def mp_sdn_primary(rates_mbit: Mapping[str, float]) -> str:
    """Algorithm 1's primary: the connection with the highest achievable rate (ties: the first name)."""
    return max(sorted(rates_mbit), key=lambda r: rates_mbit[r])


def mp_sdn_regulate(bw_mbit: float, occupancy: float, capacity_mbit: float, *, cth: float = 0.85,
                    alpha: float = 0.5, floor_mbit: float = 0.1, occ_min: float = 0.05,
                    printed: bool = False) -> float:
    """One step of Algorithm 2: the Tier-2 limit of an AP for the next execution interval.

    Congested (``occupancy >= cth``): halve, never below ``floor_mbit``. Otherwise raise by
    ``bw * alpha * (cth - occ) / occ`` (the prose; ambiguity `mpsdn-increase`), with the occupancy floored at
    ``occ_min`` and the result capped at the AP's capacity. ``printed=True`` applies Eq. 4 as
    printed (multiply by ``alpha * (cth - occ) / occ``, which shrinks the limit when that is < 1),
    for comparison only.
    """
    if occupancy >= cth:
        return max(floor_mbit, bw_mbit / 2)
    occ = max(occupancy, occ_min)
    factor = alpha * (cth - occ) / occ
    new = bw_mbit * factor if printed else bw_mbit * (1 + factor)
    return min(capacity_mbit, max(floor_mbit, new))


def tier2_shares(bw_mbit: float, secondaries: Sequence[str]) -> dict[str, float]:
    """One AP's Tier-2 limit split equally among the receivers whose secondary is on it.

    The paper meters all Tier-2 traffic of an AP together (one OpenFlow meter); per receiver and
    path steering splits that aggregate equally (our choice; a shared meter lets one flow take it all).
    """
    if not secondaries:
        return {}
    return {rx: bw_mbit / len(secondaries) for rx in secondaries}


@dataclass
class FloorWatch:
    """The energy-aware MP-SDN variant's rule for one receiver's secondary path (§5.5, derived).

    A secondary whose Tier-2 share sat at the floor for ``m`` consecutive intervals is removed (its
    radio's theta buys almost no data); it is re-admitted when the AP's occupancy is below
    ``cth - margin`` *and* the marginal-efficiency condition holds (``admit`` is the caller's answer).
    """

    m: int = 3
    streak: int = 0
    removed: bool = False

    def step(self, at_floor: bool, occupancy: float, cth: float, margin: float, admit: bool) -> bool:
        """Advance one interval; True while the secondary stays in use."""
        if self.removed:
            if occupancy < cth - margin and admit:
                self.removed, self.streak = False, 0
            return not self.removed
        self.streak = self.streak + 1 if at_floor else 0
        if self.streak >= self.m:
            self.removed = True
        return not self.removed


# ---------------------------------------------------------------- marginal efficiency (§7.2)


def marginal_efficiency(rates_mbit: Mapping[str, float], power: Mapping[str, tuple[float, float]],
                        p0_mw: float) -> Choice:
    """§7.2: start from the best single path by x/(P0 + P(x)); add a path s iff x_s/P_s(x_s) > X/(P0 + P).

    Paths are tried in descending order of their own x/P; ``rates_mbit`` are what each path carries
    (mplab passes the stand-alone probe rates, so the rule is optimistic about a second path: under
    sharing it adds less than its probe).
    """
    live = {r: x for r, x in rates_mbit.items() if x > 0}
    if not live:
        raise ValueError("no path carried anything")
    first = max(sorted(live), key=lambda r: live[r] / (p0_mw + power_mw(power, r, live[r])))
    chosen = [first]
    x_cur, p_cur = live[first], power_mw(power, first, live[first])
    steps = []
    for s in sorted((r for r in live if r != first), key=lambda r: -live[r] / power_mw(power, r, live[r])):
        marginal = live[s] / power_mw(power, s, live[s])
        device = x_cur / (p0_mw + p_cur)
        steps.append({"path": s, "marginal_mbit_per_mj": marginal, "device_mbit_per_mj": device,
                      "added": marginal > device})
        if marginal > device:
            chosen.append(s)
            x_cur += live[s]
            p_cur += power_mw(power, s, live[s])
    return Choice(frozenset(chosen), None, {"first": first, "steps": steps, "p0_mw": p0_mw,
                                            "bits_per_j": 1000 * x_cur / (p0_mw + p_cur)})
