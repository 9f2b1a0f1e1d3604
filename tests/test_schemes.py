"""The related schemes' decision rules on hand-computed cases from docs/reference/papers.md.

Each test names the section (and, where it has one, the table or worked example) its numbers come
from. Power constants are the papers' (§6.1): WiFi b = 137 mW/(Mbit/s), theta = 132.9 mW; LTE 52 and
1288; 3G 122.1 and 817.9. Rates in Mbit/s; bits per joule = 1000 * Mbit/s / mW.
"""
from __future__ import annotations

import math

import pytest

from controller import schemes
from controller.policy import Context, PathStats, ReceiverMeasurement
from controller.related import MpSdn, MpSdnEnergy
from controller.registry import make_policy
from controller.schemes import PAPER_POWER as P, PathState

#: ES-MPTCP Table 3 (and EE-MPTCP's motivation testbed): WLAN 25 Mbit/s, 25 ms RTT, 1 % loss; 3G 5 Mbit/s, 65 ms, 0 %.
PAPER_LINKS = {"wifi": PathState(25, 0.025, 0.01), "3g": PathState(5, 0.065, 0.0)}


def test_lia_fixed_point_on_the_es_mptcp_links():
    # §2.2 Eq. 6 by hand, 3G loss floored at 1e-4 (ambiguity `zero-loss`):
    # best = max(sqrt(2/.01)/.025, sqrt(2/1e-4)/.065) = max(565.7, 2175.7) = 2175.7 pkt/s;
    # denom = 1/(.025*.01) + 1/(.065*1e-4) = 4000 + 153846 = 157846;
    # w_wifi = (1/.01) * 2175.7 / 157846 = 1.378 pkt -> 1.378 / .025 s * 1460 * 8 bit = 0.644 Mbit/s;
    # w_3g = 137.8 pkt -> 2120 pkt/s = 24.8 Mbit/s, capped at the 5 Mbit/s capacity.
    x = schemes.lia_rates(PAPER_LINKS)
    assert x["wifi"] == pytest.approx(0.644, abs=0.001)
    assert x["3g"] == 5
    # The LIA property without caps: the connection gets one Reno flow on its best path.
    wide = {r: PathState(1e9, s.rtt_s, s.loss) for r, s in PAPER_LINKS.items()}
    xw = schemes.lia_rates(wide)
    reno_best = 1460 * 8 / 1e6 * math.sqrt(2 / 1e-4) / 0.065
    assert sum(xw.values()) == pytest.approx(reno_best, rel=1e-9)


def test_es_mptcp_ratio_objective_in_size_mode_is_the_squared_rate_over_power_rule():
    # §2.1, derived: with T = S / sum X, O_k = X^2 / (S P), so "both" wins iff
    # (x_W + x_3G)^2 / (P_W + P_3G) > x_best^2 / P_best. With the LIA rates (0.644, 5):
    # 3G ranks first (b' = 122.1 + 817.9/5 = 285.7 < 137 + 132.9/0.644 = 343.4);
    # 3G alone: 25 / 1428.4 = 0.01750; both: 5.644^2 / (1428.4 + 137*0.644 + 132.9) = 31.86 / 1649.5 = 0.01931.
    c = schemes.es_mptcp(PAPER_LINKS, P, 800 * 1024, time_mode="size")
    assert c.trace["ranking"] == ["3g", "wifi"]
    assert c.trace["energy_per_mbit"]["3g"] == pytest.approx(285.68, abs=0.01)
    assert c.trace["energy_per_mbit"]["wifi"] == pytest.approx(343.4, abs=0.1)
    o1, o2 = (k["objective"] for k in c.trace["candidates"])
    assert o2 / o1 == pytest.approx((31.86 / 1649.5) / (25 / 1428.4), rel=2e-3)
    assert c.paths == {"wifi", "3g"}


def test_es_mptcp_switches_its_subflow_set_with_file_size():
    # §2.5: the best subflow set depends on the file size (single-path WLAN wins small files). With the
    # paper's round counting (T = r0 * RTT_slowest) a short file ends in slow start on the 25 ms WLAN,
    # before the 65 ms 3G subflow delivers much: WLAN alone; a 16 MB file gains from adding 3G (the switch
    # lies between 4 and 8 MB; the model is quadratic in the size: 60 MB took 18 s).
    small = schemes.es_mptcp(PAPER_LINKS, P, 16 * 1024)
    large = schemes.es_mptcp(PAPER_LINKS, P, 16 * 2**20)
    assert small.paths == {"wifi"}
    assert large.paths == {"wifi", "3g"}


def test_es_mptcp_switch_is_where_the_chosen_set_changes():
    # §2.5 on the paper's links (Table 3): WLAN alone for small files, WLAN + 3G for large ones; the
    # switch found by doubling then bisection (to 1 KiB), checked against the rule on both sides of it.
    sw = schemes.es_mptcp_switch(PAPER_LINKS, P)
    assert sw.below == {"wifi"} and sw.above == {"wifi", "3g"}
    assert schemes.es_mptcp(PAPER_LINKS, P, sw.at_bytes).paths == sw.above
    assert schemes.es_mptcp(PAPER_LINKS, P, sw.at_bytes - 1024).paths == sw.below
    assert 5 * 2**20 < sw.at_bytes < 5.5 * 2**20  # 5.24 MiB
    # With T = S / sum X the file size cancels out of the ratio (§2.1, derived): no switch.
    assert schemes.es_mptcp_switch(PAPER_LINKS, P, time_mode="size") is None


def test_rounds_model_remembers_rounds_without_changing_them():
    # The cumulative model asked out of order gives what a fresh model gives for each round count.
    m = schemes.RoundsModel(0.01, 10.0, 64.0, 40.0)
    late, early = m(50), m(3)
    assert late == schemes.rounds_model(50, 0.01, w_cap=40.0) and early == schemes.rounds_model(3, 0.01, w_cap=40.0)
    assert m(0) == 0.0 and 0 < early < schemes.rounds_model(3, 0.0)  # lossy: under the lossless 10 + 20 + 40


def test_round_model_slow_start_and_caps():
    # §4.2 with p = 0: windows 10, 20, 40 -> 70 segments in three rounds; capped at a BDP of 27.8
    # segments (5 Mbit/s * 65 ms / 11680 bit): 10 + 20 + 27.8 = 57.8.
    assert schemes.rounds_model(3, 0.0) == pytest.approx(70)
    assert schemes.rounds_model(3, 0.0, w_cap=27.8) == pytest.approx(57.8)
    assert schemes.bdp_pkts(PAPER_LINKS["3g"], "3g") == pytest.approx(5 * 0.065 / (1460 * 8 / 1e6))


def test_loss_outcomes_binomial_and_small_windows():
    # Eqs. 10-12 with binom(w, l) (ambiguity `binomial`): W = 10, p = 0.1: P0 = 0.9^10 = 0.34868;
    # P1 (>= 7 losses) = sum_{l=7}^{10} C(10,l) .1^l .9^(10-l) = 9.1216e-6; P2 = the rest.
    p0, p1, p2 = schemes.loss_outcomes(10, 0.1)
    assert p0 == pytest.approx(0.34868, abs=1e-5)
    assert p1 == pytest.approx(9.1216e-6, rel=1e-4)
    assert p0 + p1 + p2 == pytest.approx(1.0)
    # W <= 3: any loss is a timeout. W = 2, p = 0.5: P0 = 0.25, P1 = 0.75.
    assert schemes.loss_outcomes(2, 0.5) == (0.25, 0.75, 0.0)


def test_ee_mptcp_ranking_and_difference_objective():
    # §4.3 level 1 with the NS-3 links of EE-MPTCP Table 2 (WiFi 10 Mbit/s 50 ms 0.5 %, LTE 20 Mbit/s
    # 150 ms lossless), no windows measured so x = capacity: b'_LTE = 52 + 1288/20 = 116.4 <
    # b'_WiFi = 137 + 132.9/10 = 150.3, so LTE ranks first.
    links = {"wifi": PathState(10, 0.05, 0.005), "lte": PathState(20, 0.15, 0.0)}
    c = schemes.ee_mptcp(links, P, 1024 * 1024)
    assert c.trace["ranking"] == ["lte", "wifi"]
    for k in c.trace["candidates"]:  # O_k = sum X - T * sum(b X + theta), in (Mbit/s, mJ)
        assert k["objective"] == pytest.approx(sum(k["rate_mbit"].values()) - k["time_s"] * k["power_mw"])
        slow = max(k["paths"], key=lambda r: links[r].rtt_s)
        assert k["time_s"] == pytest.approx(k["rounds"] * links[slow].rtt_s)
    # Adding WiFi halves the 1 MB completion time and saves more energy than its theta costs.
    assert c.paths == {"lte", "wifi"}


@pytest.mark.parametrize("caps, paths, ee", [
    # §3.5 table (radio model only): (C_W, C_L) -> the best feasible split and its bits per joule.
    ((10, 20), {"lte": 20}, 8.59),   # LTE alone 20/2328; "both" feasible (x_L >= 15.2) but worse
    ((10, 5), {"wifi": 10}, 6.65),   # 10/1502.9; LTE alone misses R = 10, "both" violates (7)
    ((25, 10), {"wifi": 25}, 7.03),  # 25/3557.9; "both" needs x_L >= 15.2 > 10
])
def test_eemptcp_rate_split_on_the_reference_table(caps, paths, ee):
    c = schemes.eemptcp({"wifi": caps[0], "lte": caps[1]}, P)
    assert dict(c.caps_mbit) == paths
    assert c.trace["ee_mbit_per_j"] == pytest.approx(ee, abs=0.005)


def test_eemptcp_emax_readings_and_the_three_path_check():
    # §3.5: "both" is feasible iff x_L >= 1288/85 = 15.2 under max_at_aggregate; never under largest_theta.
    assert ["lte", "wifi"] in schemes.eemptcp({"wifi": 10, "lte": 20}, P).trace["feasible_sets"]
    assert ["lte", "wifi"] not in schemes.eemptcp({"wifi": 10, "lte": 20}, P, emax_mode="largest_theta").trace["feasible_sets"]
    assert ["lte", "wifi"] not in schemes.eemptcp({"wifi": 10, "lte": 15}, P).trace["feasible_sets"]
    # §3.4 derived check: Mathis C = 0.65 / 1.01 / 0.84 Mbit/s -> {WiFi, 3G} at capacity, ~1.30 Mb/J.
    c = schemes.eemptcp({"wifi": 0.65, "lte": 1.01, "3g": 0.84}, P)
    assert c.paths == {"wifi", "3g"}
    assert c.trace["ee_mbit_per_j"] == pytest.approx(1.30, abs=0.01)
    # No feasible split (largest_theta, WiFi fastest): the fastest path alone, marked infeasible.
    c = schemes.eemptcp({"wifi": 25, "lte": 10}, P, emax_mode="largest_theta")
    assert dict(c.caps_mbit) == {"wifi": 25} and c.trace["infeasible"]


def test_mp_sdn_regulation_steps():
    # §5.2 Algorithm 2, CTh 0.85, alpha 0.5, floor 0.1: congested -> halve; 0.15 -> floor 0.1.
    assert schemes.mp_sdn_regulate(10, 0.9, 40) == 5
    assert schemes.mp_sdn_regulate(0.15, 0.9, 40) == 0.1
    # Uncongested at occ 0.5: the prose's increase 10 * (1 + 0.5 * 0.35 / 0.5) = 13.5 (ambiguity `mpsdn-increase`);
    # as printed, 10 * 0.35 = 3.5 (the bug: the "increase" shrinks the limit).
    assert schemes.mp_sdn_regulate(10, 0.5, 40) == pytest.approx(13.5)
    assert schemes.mp_sdn_regulate(10, 0.5, 40, printed=True) == pytest.approx(3.5)
    # occ 0 is floored at 0.05: factor 1 + 0.5 * 0.8 / 0.05 = 9 -> 90, capped at the capacity 40.
    assert schemes.mp_sdn_regulate(10, 0.0, 40) == 40


def test_mp_sdn_tier2_trace_falls_under_congestion_and_recovers():
    # Congested for 10 EIs from the capacity (40 -> 20 -> ... -> 0.1, pinned at the floor like the
    # NS-3 Tier-2 means of 0.09-0.16 Mbit/s), then demand drops (occ 0.2): the limit grows by
    # 1 + 0.5 * 0.65 / 0.2 = 2.625 per EI, 0.1 -> 0.26 -> 0.69 -> 1.81 -> 4.75 -> 12.5 -> 32.7 -> 40 (capped).
    bw, trace = 40.0, []
    for occ in [0.95] * 12 + [0.2] * 7:
        bw = schemes.mp_sdn_regulate(bw, occ, 40)
        trace.append(bw)
    assert trace[:3] == [20, 10, 5]
    assert trace[11] == 0.1
    assert trace[12] == pytest.approx(0.2625)
    assert all(b > a for a, b in zip(trace[11:], trace[12:]))
    assert trace[-2] == pytest.approx(32.72, abs=0.01) and trace[-1] == 40


def test_marginal_efficiency_worked_example():
    # §7.2: LTE 20 Mbit/s (2328 mW) + WiFi 10 Mbit/s (1502.9 mW); "both" beats LTE alone iff
    # P0 > 20 * 1502.9 / 10 - 2328 = 677.8 mW. With P0 = 2 W: LTE 4.62 Mb/J, WiFi 2.85, both 5.14.
    rates = {"lte": 20.0, "wifi": 10.0}
    c = schemes.marginal_efficiency(rates, P, 2000)
    assert c.paths == {"lte", "wifi"} and c.trace["first"] == "lte"
    assert c.trace["bits_per_j"] == pytest.approx(30 / 5830.9 * 1000)  # 5.145
    assert schemes.marginal_efficiency(rates, P, 600).paths == {"lte"}
    assert schemes.marginal_efficiency(rates, P, 700).paths == {"lte", "wifi"}


def test_floor_watch_removes_after_m_floor_cycles_and_readmits_with_margin():
    w = schemes.FloorWatch(m=3)
    assert [w.step(True, 0.9, 0.85, 0.1, True) for _ in range(3)] == [True, True, False]
    assert w.step(False, 0.8, 0.85, 0.1, True) is False   # 0.8 is not below CTh - margin = 0.75
    assert w.step(False, 0.5, 0.85, 0.1, False) is False  # below, but the second path does not pay
    assert w.step(False, 0.5, 0.85, 0.1, True) is True


def _m(rx: str, wifi: float, lte: float) -> ReceiverMeasurement:
    return ReceiverMeasurement(rx, {"wifi": wifi, "lte": lte}, {"wifi": PathStats(0.025, 0.01, 10),
                                                                  "lte": PathStats(0.065, 0.0, 30)})


def test_mp_sdn_policy_epochs_primary_and_tier2_caps():
    pol = make_policy("mp-sdn", {"initial_mbit": 8})
    assert isinstance(pol, MpSdn) and pol.epoch_s == 2.0
    ms = [_m("n1", 20, 8), _m("n2", 5, 12), _m("n3", 18, 6)]
    cap = {"wifi": 40.0, "lte": 36.0}
    out = pol.decide(ms, Context("cubic", 3, 2**20, epoch=0, capacity_mbit=cap))
    assert out.trace["primary"] == {"n1": "wifi", "n2": "lte", "n3": "wifi"}
    # Everyone keeps both paths; secondaries share their network's Tier-2 limit equally.
    assert out.assignment["n1"].caps_mbit == {"lte": 4.0} and out.assignment["n3"].caps_mbit == {"lte": 4.0}
    assert out.assignment["n2"].caps_mbit == {"wifi": 8.0}
    out = pol.decide(ms, Context("cubic", 3, 2**20, epoch=1, occupancy={"wifi": 0.9, "lte": 0.5}, capacity_mbit=cap))
    assert out.trace["tier2_mbit"] == {"wifi": 4.0, "lte": pytest.approx(10.8)}
    assert out.assignment["n2"].caps_mbit == {"wifi": 4.0}


def test_mp_sdn_energy_drops_a_floored_secondary():
    pol = make_policy("mp-sdn-energy", {"initial_mbit": 0.1, "m": 2, "p0_mw": 100})
    assert isinstance(pol, MpSdnEnergy)
    ms = [_m("n1", 20, 8)]
    ctx = lambda e, occ: Context("cubic", 1, 2**20, epoch=e, occupancy={"wifi": occ, "lte": occ},  # noqa: E731 - this test's Context factory, one line per epoch
                                 capacity_mbit={"wifi": 40, "lte": 36})
    assert pol.decide(ms, ctx(0, 0.9)).assignment["n1"].ifaces == {"wifi", "lte"}
    assert pol.decide(ms, ctx(1, 0.9)).assignment["n1"].ifaces == {"wifi", "lte"}
    out = pol.decide(ms, ctx(2, 0.9))
    assert out.assignment["n1"].ifaces == {"wifi"} and out.trace["removed"] == ["n1"]
    # P0 = 100 mW: LTE at 8 Mbit/s (1704 mW) does not pay for itself, so it is not re-admitted.
    assert pol.decide(ms, ctx(3, 0.1)).assignment["n1"].ifaces == {"wifi"}


def test_scheme_parameters_are_checked():
    from harness.errors import ConfigError
    with pytest.raises(ConfigError, match="parameters are"):
        make_policy("es-mptcp", {"speed": 1})
    with pytest.raises(ConfigError, match="time_mode"):
        make_policy("es-mptcp", {"time_mode": "wallclock"})
    with pytest.raises(ConfigError, match="alpha"):
        make_policy("mp-sdn", {"alpha": 1.5})
    p = make_policy("eemptcp", {"lte_theta": 1000})
    assert p.params()["lte_theta"] == 1000.0


def test_epoch_loop_thread_carries_the_testbed_name():
    # With --testbeds K one process runs K controllers: a thread dump must say which copy a loop serves.
    from harness.config.scenario import ControlSpec
    from harness.testbeds.emulated import EmulatedTestbed

    from controller.setup2 import EpochLoop, Setup2Control
    from conftest import small_inventory

    tb = EmulatedTestbed(small_inventory("mplab-t-eloop3-", [(10, 10)]))  # constructed only: no namespaces
    control = Setup2Control(ControlSpec(), {}, 2**20, testbed=tb)
    loop = EpochLoop(control, make_policy("mp-sdn", {}), [], Context("cubic", 1, 2**20))
    assert loop._thread.name == "epochs:mplab-t-eloop3-:mp-sdn"
