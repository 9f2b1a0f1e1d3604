"""mplab's coupled congestion control against the multipath-tcp.org kernel's, event by event.

``rigs/cc/oracle.py`` is the reference modules (mptcp_coupled.c, mptcp_olia.c, mptcp_balia.c,
mptcp_wvegas.c, and Linux's tcp_vegas.c for the single-path Vegas competitor) in Python;
``harness/cc/bpf/mplab_math.h`` is what mplab's struct_ops programs run.
The replay (``rigs/ccreplay.py``) applies identical event sequences to both and compares
every subflow's window after every event. Without root the C is the host build of ``calc.bpf.c``
(the same source file the BPF object is built from); with root it is the BPF object itself, run by
BPF_PROG_TEST_RUN.
"""
from __future__ import annotations

import shutil

import pytest

from rigs.cc import oracle as ref
from rigs.cc.calc import BPF_DIR, EV_ACK, EV_ROUND, EV_SAMPLE, CalcCtx, HostCalculator, SfC, VgC, WinC
from rigs.ccreplay import Mismatch, replay

ALGORITHMS = ("lia", "olia", "balia", "wvegas", "vegas")
#: Branches each algorithm's sequences must reach, or the replay proves nothing about them.
MUST_SEE = {"lia": {"coupled", "capped"}, "olia": {"epsilon -1", "epsilon 0", "epsilon 1"},
            "balia": {"alpha 1", "alpha >= 2", "rates scaled down"},
            "wvegas": {"alpha reweighted", "window down"},
            "vegas": {"reno fallback", "slow start", "slow-start exit", "window down", "window held", "window up"}}
#: (seed, subflows, RTTs of a few ms) per algorithm: long and short RTTs, two and three subflows.
CASES = [(0, 2, False), (1, 3, False), (2, 2, True), (3, 3, True)]


@pytest.fixture(scope="module")
def host_calc(tmp_path_factory) -> HostCalculator:
    if not shutil.which("clang"):
        pytest.skip("no clang (make setup installs it)")
    return HostCalculator.build(tmp_path_factory.mktemp("calc"))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_windows_agree_with_the_reference_after_every_event(host_calc, algorithm):
    seen: set[str] = set()
    total = changes = 0
    for seed, n, short in CASES:
        r = replay(algorithm, host_calc, seed, count=2500, n_subflows=n, short_rtt=short)
        seen |= r.seen
        total += r.windows_compared
        changes += r.cwnd_changes
    print(f"{algorithm}: {total} windows compared, {changes} window changes, branches {sorted(seen)}")
    assert MUST_SEE[algorithm] <= seen, f"the sequences never reached {MUST_SEE[algorithm] - seen}"
    assert changes > 200


#: A one-token change of the arithmetic per algorithm: the replay must catch each.
PLANTS = {
    "lia": ("#define LIA_SCALE 12", "#define LIA_SCALE 11"),
    "olia": ("if (cnt >= (1 << OLIA_SCALE) - 1) {", "if (cnt >= (1 << OLIA_SCALE)) {"),
    "balia": ("\talpha = max_rate / rate;", "\talpha = (max_rate + rate - 1) / rate;"),
    "wvegas": ("#define WVEGAS_TOTAL_ALPHA 10", "#define WVEGAS_TOTAL_ALPHA 9"),
    "vegas": ("#define VEGAS_BETA 4", "#define VEGAS_BETA 5"),
}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_planted_change_of_the_arithmetic_is_caught(tmp_path, algorithm):
    if not shutil.which("clang"):
        pytest.skip("no clang (make setup installs it)")
    src = tmp_path / "bpf"
    shutil.copytree(BPF_DIR, src, ignore=shutil.ignore_patterns("build"))
    old, new = PLANTS[algorithm]
    text = (src / "mplab_math.h").read_text()
    assert text.count(old) == 1, f"plant site {old!r} moved: update PLANTS"
    (src / "mplab_math.h").write_text(text.replace(old, new))
    planted = HostCalculator.build(tmp_path, src_dir=src)
    with pytest.raises(Mismatch):
        for seed, n, short in CASES:
            replay(algorithm, planted, seed, count=2500, n_subflows=n, short_rtt=short)


@pytest.mark.parametrize("algorithm", ("lia", "olia", "balia"))
def test_the_documented_choices_are_reached(host_calc, algorithm):
    """The reference verbatim (per-call counting, `<=` slow start) differs on the same sequences:
    the choices mplab documents are live, not dead flags."""
    with pytest.raises(Mismatch):
        for seed, n, short in CASES:
            replay(algorithm, host_calc, seed, count=2500, n_subflows=n, short_rtt=short,
                   choices=ref.Choices.reference())


def test_the_reference_quirks_mplab_departs_from():
    """What the reference does that mplab does not, on the kernel's own tcp_slow_start (Linux >= 4.3)."""
    ch = ref.Choices.reference()
    twins = [ref.Sf(10, 160_000), ref.Sf(10, 160_000)]
    # `<=`: a window equal to ssthresh (where recovery leaves it) stays in slow start, which cannot grow it.
    w = ref.Win(cwnd=10, ssthresh=10)
    for _ in range(1000):
        ref.lia_on_ack(w, twins, 0, 1, ch)
    assert w.cwnd == 10
    ref.lia_on_ack(w, twins, 0, 1)          # mplab: congestion avoidance
    assert w.cnt == 1
    # Per-call counting: 41 calls per packet at threshold 40 whatever each ACK covers; mplab counts packets.
    w_ref, w_mplab = ref.Win(10, 5), ref.Win(10, 5)
    for _ in range(40):
        ref.lia_on_ack(w_ref, twins, 0, 2, ch)
        ref.lia_on_ack(w_mplab, twins, 0, 2)
    assert (w_ref.cwnd, w_mplab.cwnd) == (10, 12)
    # wVegas: zero queueing delay halves the window in the reference.
    st, w = ref.WvState(base_rtt=20_001), ref.Win(40, 10)
    for _ in range(3):
        ref.wvegas_sample(st, 20_000)
    ref.wvegas_round(w, st, [ref.Sf(40, 160_000)], 0, 1, ch)
    assert w.cwnd == 20


def _one(calc: HostCalculator, program: str, sfs: list[tuple[int, int, int]], me: int, cwnd: int) -> CalcCtx:
    ctx = CalcCtx()
    for i, (c, rtt_us, loss_int) in enumerate(sfs):
        ctx.sf[i] = SfC(0x1000 + i, c, rtt_us << 3, 0, loss_int, 0)
    ctx.win = WinC(cwnd, 5, 0, 0x7FFFFFFF, 0, 1448)
    ctx.me, ctx.event, ctx.acked = me, EV_ACK, 1
    return calc.call(program, ctx)


def test_hand_computed_values(host_calc):
    """Worked by hand from the papers' equations and the reference's fixed point, not from either implementation."""
    twins = [(10, 20_000, 0), (10, 20_000, 0)]
    # LIA, RFC 6356: alpha = 1/2 for twins, so 1/min(alpha/20, 1/10) = 40 ACKs per packet; the
    # reference's alpha = (10 << 32) / (20 << 10)^2 = 102 (truncated), 4096 / 102 = 40.
    got = _one(host_calc, "lia", twins, 0, 10)
    assert (got.lia_alpha, got.lia_cnt) == (102, 40)
    assert (ref.lia_alpha([ref.Sf(10, 160_000)] * 2)[0], ref.lia_ai_cnt([ref.Sf(10, 160_000)] * 2, 10)) == (102, 40)
    # OLIA, windows 10 and 20, equal RTTs and inter-loss bytes: path 1 is in B\M (eps = +1/2), so
    # per ACK 10/30^2 + 0.5/10 = 0.0611 packet = 62.6 / 1024; the reference's combined quotient truncates to 62.
    assert _one(host_calc, "olia", [(10, 20_000, 5000), (20, 20_000, 5000)], 0, 10).olia_inc == 62
    # and path 2, the largest window (M): 20/900 - 0.5/20 = -0.00278 packet = -2.8 / 1024 -> -2.
    assert _one(host_calc, "olia", [(10, 20_000, 5000), (20, 20_000, 5000)], 1, 20).olia_inc == -2
    # BALIA, windows 10 and 30 at equal RTTs (x = 724000 and 2172000 bytes/s with mss 1448, 20 ms):
    # ai = 10 * 10 * 40^2 / (40 * 70) = 57.1 -> 57; alpha = 3 -> min(3, 1.5): md = 5 * 1.5 = 7.
    got = _one(host_calc, "balia", [(10, 20_000, 0), (30, 20_000, 0)], 0, 10)
    assert (got.balia_ai, got.balia_md) == (57, 7)
    assert ref.balia_params([ref.Sf(10, 160_000), ref.Sf(30, 160_000)], 0, 10, 1448) == (57, 7)
    # With alpha below 2 the reference truncates it to 1: the decrease is Reno's half.
    assert _one(host_calc, "balia", [(10, 20_000, 0), (15, 20_000, 0)], 0, 10).balia_md == 5


@pytest.mark.root
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_bpf_object_agrees_with_the_reference(algorithm):
    """The same replay through calc.bpf.o under BPF_PROG_TEST_RUN: the kernel's BPF runs what the host build runs."""
    from harness.cc import bpfcc
    from rigs.cc.calc import BpfCalculator

    obj = bpfcc.BUILD_DIR / "calc.bpf.o"
    if not obj.exists():
        pytest.skip("BPF objects not built: run `make bpf`")
    with BpfCalculator(obj) as bpf:
        for seed, n, short in CASES[:2] + CASES[3:]:
            replay(algorithm, bpf, seed, count=1500, n_subflows=n, short_rtt=short)


def _vegas_round(calc: HostCalculator, cwnd: int, ssthresh: int, base_us: int, rtt_us: int) -> tuple[tuple, tuple]:
    """One Vegas round (three samples: the base, then this round's) in mplab's C and in the model."""
    ctx = CalcCtx()
    ctx.win = WinC(cwnd, ssthresh, 0, 0x7FFFFFFF, 0, 1448)
    ctx.vg = VgC(base_us + 1, 0x7FFFFFFF, 0, 1)
    for _ in range(3):
        ctx.event, ctx.rtt_us = EV_SAMPLE, rtt_us
        calc.call("vegas", ctx)
    ctx.event, ctx.acked = EV_ROUND, 1
    calc.call("vegas", ctx)
    w, st = ref.Win(cwnd, ssthresh), ref.VegasState(base_rtt=base_us + 1, min_rtt=0x7FFFFFFF)
    for _ in range(3):
        ref.vegas_sample(st, rtt_us)
    ref.vegas_round(w, st, 1)
    return (ctx.win.cwnd, ctx.win.ssthresh), (w.cwnd, w.ssthresh)


def test_vegas_by_hand(host_calc):
    """tcp_vegas.c worked by hand: base RTT 20 ms, this round's 24 ms, diff = cwnd * 4000 / 20001."""
    # cwnd 10: diff 1 < alpha 2: +1 (ssthresh follows tcp_current_ssthresh: 11/2 + 11/4 = 5 + 2)
    assert _vegas_round(host_calc, 10, 5, 20_000, 24_000) == ((11, 7),) * 2
    # cwnd 20: diff 3, between alpha and beta: held
    assert _vegas_round(host_calc, 20, 5, 20_000, 24_000) == ((20, 15),) * 2
    # cwnd 30: diff 5 > beta 4: -1, ssthresh min(ssthresh, cwnd) then 29/2 + 29/4 = 21
    assert _vegas_round(host_calc, 30, 5, 20_000, 24_000) == ((29, 21),) * 2
    # slow start, cwnd 30: diff 5 > gamma 1: leave at 30 * 20001 / 24001 = 25 (truncated) + 1
    assert _vegas_round(host_calc, 30, 1000, 20_000, 24_000) == ((26, 26),) * 2
    # slow start, no queue (diff 0): keep growing
    assert _vegas_round(host_calc, 30, 1000, 20_000, 20_000) == ((31, 1000),) * 2
