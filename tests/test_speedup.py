"""Faster than real time: the scaled inventory, the power model's invariance, and records in real time."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, small_inventory

from harness.campaign.campaign import start_campaign
from harness.config.inventory import load_inventory
from harness.config.load import parse_model
from harness.config.scenario import Scenario
from harness.errors import ConfigError
from harness.meters.power import PowerModel
from harness.upkeep.clean import clean_prefix
from harness.emulation.speedup import POLL_CAP_HZ, check_speedup, scale_inventory


def test_scaled_inventory_multiplies_rates_divides_times_and_keeps_buffers_in_bytes():
    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    before = inv.model_dump(mode="json")
    fast = scale_inventory(inv, 8)
    assert inv.model_dump(mode="json") == before  # the original is untouched
    for rx, frx in zip(inv.receivers, fast.receivers):
        for radio in ("wifi", "lte"):
            ch, fch = rx.interfaces[radio].channel, frx.interfaces[radio].channel
            assert fch.rate_mbit == pytest.approx(8 * ch.rate_mbit)
            assert fch.delay_ms == pytest.approx(ch.delay_ms / 8)
            assert fch.buffer_bytes == ch.buffer_bytes  # the BDP in packets is what a slower testbed had
        # the recorder's polls stop growing at the cap (the device integrates at 80 Hz and answers means)
        assert frx.meter.rate_hz == pytest.approx(POLL_CAP_HZ) and POLL_CAP_HZ < 80.0
        assert scale_inventory(inv, 1.5).receivers[0].meter.rate_hz == pytest.approx(15.0)
    e, fe = inv.emulation, fast.emulation
    assert fe.wifi_ap.capacity_mbit == pytest.approx(8 * e.wifi_ap.capacity_mbit)
    assert fe.lte_cell.capacity_mbit == pytest.approx(8 * e.lte_cell.capacity_mbit)
    assert fe.radio_loop_hz == pytest.approx(8 * e.radio_loop_hz)
    assert fe.power_profile.lte.tail_s == pytest.approx(e.power_profile.lte.tail_s / 8)
    assert fe.power_profile.lte.promotion_s == pytest.approx(e.power_profile.lte.promotion_s / 8)
    assert scale_inventory(inv, 1) is inv


def test_the_scaled_power_model_draws_the_same_power_and_a_tail_worth_one_eighth():
    prof = load_inventory(REPO / "inventory" / "emulated.yaml").emulation.power_profile
    fast_prof = scale_inventory(load_inventory(REPO / "inventory" / "emulated.yaml"), 8).emulation.power_profile
    slow, fast = PowerModel(prof), PowerModel(fast_prof)
    # 12 Mbit/s on LTE and 5 on WiFi for 2 s of testbed time: the same power at every matching instant
    for k in range(40):
        t = k * 0.05
        assert fast.power_w(t / 8, {"lte": 96.0, "wifi": 40.0}) == pytest.approx(
            slow.power_w(t, {"lte": 12.0, "wifi": 5.0}))
    s_slow, j_slow = slow.tail_remaining(2.0)
    s_fast, j_fast = fast.tail_remaining(2.0 / 8)
    assert s_fast == pytest.approx(s_slow / 8, abs=2e-3)
    assert j_fast == pytest.approx(j_slow / 8, rel=0.01)  # x 8 in the record: the same tail energy


@pytest.mark.parametrize("inv_name, policies, why", [
    ("lab.yaml", False, "is a lab"),
    ("emulated.yaml", True, "controller policies are not scaled"),
])
def test_speedup_is_refused_where_time_cannot_be_scaled(inv_name, policies, why):
    inv = load_inventory(REPO / "inventory" / inv_name)
    with pytest.raises(ConfigError, match=why):
        check_speedup(inv, 4, policies=policies)
    check_speedup(inv, 1, policies=policies)  # real time is always fine


def test_run_refuses_speedup_on_a_lab_and_on_resume_with_one_line(tmp_path):
    lab = REPO / "inventory" / "lab.yaml"
    res = subprocess.run([sys.executable, "-m", "mplab", "run", "scenarios/quick.yaml", "--inventory", str(lab),
                          "--speedup", "4", "--dry-run"], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 2 and "lab" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = subprocess.run([sys.executable, "-m", "mplab", "run", "--resume", str(tmp_path), "--speedup", "4"],
                         cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 2 and "--speedup" in res.stderr, res.stderr


@pytest.mark.root
@pytest.mark.machine  # a tail of 0.5 s in wall time held to 10 %: run alone (see `make test`)
def test_a_campaign_at_speedup_4_records_real_time_figures(tmp_path, prefix):
    # At S = 4 every scheduling delay counts four times in testbed units: beside three other workers' testbeds
    # and two busy loops the tail read 6.20 J against 6.92 (a late client exit moves tail time into the window).
    # One receiver alone: its LTE channel (8 Mbit/s here) is its throughput in real time, whatever S.
    inv = small_inventory(prefix, [(20, 8)], lte_tail_s=2.0)
    sc = parse_model(Scenario, {"name": "fast", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["lte"], "samples_per_case": 1, "file_size": "4M", "speedup": 4,
                                "retries": 0}, "test")
    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="fast")
    finally:
        clean_prefix(prefix, nested=False)
    (r,) = c.records()
    assert r["status"] == "ok", r["error"]
    assert r["speedup"] == 4
    # Cubic's clock runs 4 x faster (harness.cc.cubic) and the TCP timers are / 4 (harness.cc.timers): records say so.
    assert r["cc_impl"].startswith("bpf:mplab_cubic_s4@sha256:"), r["cc_impl"]
    assert r["tcp_timers"] and "delack_max=" in r["tcp_timers"], r["tcp_timers"]
    assert 6.0 < r["throughput_mbit"] < 8.2, r["throughput_mbit"]  # x 4 on the wire, / 4 in the record
    assert r["duration_s"] == pytest.approx(4 * 2**20 * 8 / 1e6 / r["throughput_mbit"], rel=0.05)
    # energy is in real time too: power (unchanged) x the real-time duration
    assert r["energy_j"] == pytest.approx(r["mean_power_w"] * r["duration_s"], rel=0.05)
    prof = inv.emulation.power_profile
    # The window ends at the client's exit as seen; the record says how late that can be (exit_lag_s, in
    # testbed time: 15 ms of wall time x 4 on a quiet machine). A window that late holds that much of the
    # tail, so the tail misses it: within 10 % plus that, never further off unannounced.
    tail_w = prof.base_w + prof.lte.tail_mw / 1000
    assert r["exit_lag_s"] is not None and r["energy_edge_j"] is not None
    assert abs(r["tail_energy_j"] - tail_w * 2.0) <= 0.1 * tail_w * 2.0 + tail_w * r["exit_lag_s"], r
    # The runner saw the data begin (the receiver's bytes looked at every ms) and the window starts there: after
    # iperf3's exchanges before the data (part of the exit lag), and no further from the data's start than the
    # look before (a few ms of wall time x 4 at most). Only that is judged, with the meter's edges.
    assert r["start_lag_s"] is not None and 0 < r["start_lag_s"] < r["exit_lag_s"], r
    assert r["window_start"] >= r["started_at"] and 0 < r["start_unsure_s"] < 4 * 0.01, r
    lagged = r["start_unsure_s"] > 0.03 * r["duration_s"] or r["energy_edge_j"] > 0.03 * r["energy_j"]
    assert any(f.startswith("speedup-lag") for f in r["flags"]) == lagged, r["flags"]
    # The sender's server, spinning after its last write while the kernel delivered what its socket held, was
    # stopped until the client had read the file (harness.emulation.sendertail), and the record says how long.
    assert r["sender_paused_s"] is not None and r["sender_paused_s"] > 0, r
    manifest = json.loads((c.path / "manifest.json").read_text())
    assert manifest["scenario"]["speedup"] == 4 and manifest["testbed"]["speedup"] == 4


@pytest.mark.root
@pytest.mark.machine  # real time: run alone (see `make test`)
def test_a_campaign_with_a_speedup_per_mode_runs_one_phase_per_speedup_and_each_record_says_its_own(tmp_path, prefix):
    inv = small_inventory(prefix, [(20, 8)])
    sc = parse_model(Scenario, {"name": "phases", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["lte", "wifi"], "samples_per_case": 2, "file_size": "2M", "retries": 0,
                                "speedup_by_mode": {"wifi": 4}}, "test")
    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="phases")
    finally:
        clean_prefix(prefix, nested=False)
    recs = c.records()
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert {(r["mode"], r["speedup"]) for r in recs} == {("wifi", 4), ("lte", 1)}
    # The WiFi samples on a testbed built at S = 4 (Cubic's clock x 4), the LTE ones on one at real time.
    assert {r["cc_impl"].split("@")[0] for r in recs if r["mode"] == "wifi"} == {"bpf:mplab_cubic_s4"}
    assert {r["cc_impl"] for r in recs if r["mode"] == "lte"} == {"kernel:cubic"}
    for r in recs:  # throughput in real time either way: the channel's rate, whatever the phase's S
        assert r["throughput_mbit"] < (20.5 if r["mode"] == "wifi" else 8.2), r
    starts = [json.loads(line) for line in (c.path / "sessions.jsonl").read_text().splitlines()
              if json.loads(line)["event"] == "start"]
    assert [(e["speedup"], e["pending"]) for e in starts] == [(4, 2), (1, 2)]
    manifest = json.loads((c.path / "manifest.json").read_text())
    assert manifest["scenario"]["speedup_by_mode"] == {"wifi": 4} and len(manifest["plan"]) == 4


def test_auto_takes_the_lowest_validated_speedup_of_the_scenarios_ccs_and_1_for_an_unvalidated_one(tmp_path):
    from harness.emulation.speedup import validated_speedup
    table = tmp_path / "speedup.json"
    table.write_text(json.dumps({"highest": {"cubic": 16, "lia": 4}}))
    assert validated_speedup(["cubic"], table)[0] == 16
    assert validated_speedup(["cubic", "lia"], table)[0] == 4
    s, why = validated_speedup(["cubic", "olia"], table)
    assert s == 1 and "olia not validated" in why
    with pytest.raises(ConfigError, match="no validation table"):
        validated_speedup(["cubic"], tmp_path / "missing.json")
    table.write_text("{")
    with pytest.raises(ConfigError, match="not a bench/speedup.py table"):
        validated_speedup(["cubic"], table)


def test_auto_never_picks_an_s_that_failed_nor_one_above_it(tmp_path):
    """A control's climb stops at the first S where any of its cells failed, in any run of a merged table,
    even if a higher S held; an S not tested for it is passed over; the table's "highest" is not trusted."""
    from harness.emulation.speedup import highest_holding, validated_speedup

    def cell(holds: bool) -> dict:
        return {"holds": holds}

    cells = {"emulated loss 0% s2": {"olia-n5-both": cell(True), "cubic-n5-both": cell(True)},
             "emulated loss 0% s4": {"cubic-n1-wifi": cell(True)},
             "paper-lab loss 1% s8": {"olia-n8-lte": cell(False), "cubic-n8-lte": cell(True)},
             "emulated loss 0% s8": {"olia-n5-both": cell(True), "cubic-n5-both": cell(False)},
             "emulated loss 0% s16": {"olia-n5-both": cell(True), "cubic-n5-both": cell(True)}}
    assert highest_holding(cells, ["olia", "cubic", "balia"]) == {"olia": 2.0, "cubic": 4.0, "balia": 1.0}
    table = tmp_path / "speedup.json"
    table.write_text(json.dumps({"cells": cells, "highest": {"olia": 16, "cubic": 16}}))  # a stale summary
    assert validated_speedup(["olia"], table)[0] == 2
    assert validated_speedup(["cubic"], table)[0] == 4
    s, why = validated_speedup(["cubic", "wvegas"], table)
    assert s == 1 and "wvegas not validated" in why



def test_auto_at_k_testbeds_steps_down_to_the_s_whose_measured_cpu_fits_the_machine(tmp_path):
    """Cells validated on one testbed: K copies each need the heaviest cell's measured cores. An S without a
    figure is not picked for K > 1 (not assumed), and a levers-off campaign's figure is not read."""
    from harness.emulation.speedup import CPU_BUDGET, validated_speedup
    held = {"cubic-n9-both": {"holds": True}}
    table = tmp_path / "speedup.json"
    table.write_text(json.dumps({
        "cells": {f"emulated loss 0% s{s}": held for s in (4, 8, 12)},
        "machine": {"emulated loss 0% s4": {"cores_peak_cell": 0.6}, "emulated loss 0% s8": {"cores_peak_cell": 1.1},
                    "emulated loss 0% levers-off s12": {"cores_peak_cell": 0.1}}}))
    assert validated_speedup(["cubic"], table, testbeds=1, cpus=2)[0] == 12  # what the table measured
    s, why = validated_speedup(["cubic"], table, testbeds=2, cpus=2)
    assert s == 4 and 2 * 0.6 <= CPU_BUDGET * 2 < 2 * 1.1
    assert "S = 12: the table has no CPU figure" in why and "S = 8: 2 testbeds x 1.10 cores" in why
    assert validated_speedup(["cubic"], table, testbeds=2, cpus=4)[0] == 8
    assert validated_speedup(["cubic"], table, testbeds=3, cpus=2)[0] == 1


def test_auto_per_mode_judges_each_modes_cells_and_cpu_and_the_campaign_runs_one_phase_per_speedup(tmp_path):
    """WiFi and LTE cells held to 16 and both-path cells to 4 for every control: auto gives each mode its own S
    (the scenario's `speedup` the lowest), each weighed at K testbeds against its own cells' measured cores; the
    estimate divides each sample by its mode's S, and a campaign's phases group the plan by S, highest first."""
    from harness.campaign.campaign import sample_estimates_s, speedup_phases
    from harness.campaign.entry import speedup_value, with_speedup
    from harness.campaign.plan import plan_campaign
    from harness.emulation.speedup import validated_speedup

    def rows(s: float) -> dict:
        out = {}
        for cc in ("cubic", "lia"):
            for mode, cores in (("wifi", 0.3 + s / 20), ("lte", 0.35), ("both", 0.5)):
                out[f"{cc}-n9-{mode}"] = {"holds": mode != "both" or s <= 4, "cores": cores}
        return out

    table = tmp_path / "speedup.json"
    table.write_text(json.dumps({"cells": {f"emulated loss 0% s{s}": rows(s) for s in (4, 8, 16)}}))
    assert validated_speedup(["cubic", "lia"], table, mode="wifi")[0] == 16
    assert validated_speedup(["cubic", "lia"], table, mode="both")[0] == 4
    assert validated_speedup(["cubic", "lia"], table)[0] == 4  # every cell at once: what one S must be
    # Two testbeds on 2 cores: 2 x 1.1 (WiFi at 16) exceeds 1.6, 2 x 0.7 (WiFi at 8) fits; LTE fits at 16.
    s, why = validated_speedup(["cubic", "lia"], table, testbeds=2, cpus=2, mode="wifi")
    assert s == 8 and "2 testbeds x 1.10 cores (the heaviest wifi cell" in why
    assert validated_speedup(["cubic", "lia"], table, testbeds=2, cpus=2, mode="lte")[0] == 16

    sc = parse_model(Scenario, {"name": "m", "congestion_controls": ["cubic", "lia"], "receiver_counts": [1, 2],
                                "modes": ["wifi", "lte", "both"], "samples_per_case": 2, "file_size": "6M"}, "test")
    said: list[str] = []
    low, by_mode = speedup_value("auto", sc, table, said.append, testbeds=1)
    assert (low, by_mode) == (4, {"wifi": 16, "lte": 16, "both": 4}) and len(said) == 3
    fast = with_speedup(sc, low, by_mode)
    assert fast.speedups == [16, 4] and fast.speedup_for("both") == 4 and fast.speedup_for("wifi", policy=True) == 4
    assert speedup_value("auto", parse_model(Scenario, {**sc.model_dump(mode="json"), "modes": ["wifi", "lte"]},
                                             "t"), table)[1] is None  # one S for all: no per-mode map
    with pytest.raises(ConfigError, match="speedup_by_mode"):
        with_speedup(sc, 1, {"wifi": 65})

    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    plans = plan_campaign(fast, inv)
    phases = speedup_phases(fast, plans)
    assert [s for s, _ in phases] == [16, 4]
    assert {p.mode for p in phases[0][1]} == {"wifi", "lte"} and {p.mode for p in phases[1][1]} == {"both"}
    assert [p for _, ps in phases for p in ps if p.mode == "both"] == [p for p in plans if p.mode == "both"]
    at4 = with_speedup(sc, 4)
    for p, e16, e4 in zip(plans, sample_estimates_s(plans, fast, inv), sample_estimates_s(plans, at4, inv)):
        assert (e16 < e4) if p.mode != "both" else (e16 == e4)


def test_the_bench_judges_every_sample_and_a_bistable_cell_by_its_own_real_time_spread():
    """A cell holds when every sample at S lies within 3 % of the S = 1 median; where S = 1's own samples spread
    further (a second S = 1 campaign would fail the 3 % rule too), that spread is each sample's bound, and the row
    says so, while the cell's median stays held to 3 %."""
    from bench.speedup import compare

    def cells(mbit: list[float], energy: list[float]) -> dict:
        return {"cells": {"c": {"mbit": mbit, "energy_j": energy, "flagged": 0, "failed": 0, "cores": [0.5]}}}

    steady = cells([10.0, 10.1, 9.9], [50.0, 50.5, 49.5])
    ok = compare(steady, cells([10.2, 9.8, 10.0], [50.0, 51.0, 49.0]))["c"]
    assert ok["holds"] and not ok["judged_by_spread"] and ok["cores"] == 0.5
    one_low = compare(steady, cells([10.0, 10.0, 9.6], [50.0, 50.0, 50.0]))["c"]  # the median is fine
    assert not one_low["holds"] and "mbit x0.960" in one_low["why"]
    bistable = cells([10.0, 12.0, 9.0], [50.0, 50.5, 49.5])  # S = 1 spreads 20 %
    wide = compare(bistable, cells([11.5, 9.2, 10.0], [50.0, 50.4, 49.6]))["c"]
    assert wide["holds"] and wide["judged_by_spread"] and wide["base_spread"] == 0.2
    beyond = compare(bistable, cells([10.0, 10.0, 7.5], [50.0, 50.4, 49.6]))["c"]
    assert not beyond["holds"] and "S = 1 spread 0.200" in beyond["why"]
    # Every sample inside the 20 % spread, but the cell as a whole moved: its median is held to 3 %.
    shifted = compare(bistable, cells([11.0, 10.6, 11.5], [50.0, 50.4, 49.6]))["c"]
    assert not shifted["holds"] and shifted["why"] == "mbit median x1.100", shifted["why"]
    lagged = compare(steady, cells([10.0, 10.0, 10.0], [50.0, 60.0]))["c"]  # energy is held to the tolerance too
    assert not lagged["holds"] and "energy x1.200" in lagged["why"]


def test_a_cc_fault_sample_is_held_out_on_both_sides_unless_s_makes_more_of_them():
    """A sample flagged cc-fault (the kernel stored a threshold no callback returned) is judged neither way: its low
    throughput does not fail the cell, at S or in S = 1's reference. More such samples at S than at S = 1 beyond
    chance (one-sided Fisher exact test) fail the cell: that would be the speed-up's doing."""
    from bench.speedup import cells_of, compare

    def sample(mbit: float, fault: bool = False) -> list[dict]:
        flags = ["cc-fault: n1's wifi subflow (to 10.10.1.2) had slow-start threshold 0x81104110, ..."] if fault else []
        return [{"case_id": "lia-n2-both", "status": "ok", "throughput_mbit": mbit / 2, "energy_j": 25.0,
                 "flags": flags, "receiver": r} for r in ("n1", "n2")]

    def campaign(good: list[float], faults: int = 0) -> dict:
        samples = [sample(x) for x in good] + [sample(5.0, True) for _ in range(faults)]
        return {"cells": cells_of({f"s{i}": recs for i, recs in enumerate(samples)})}

    base = campaign([10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0, 10.1, 9.9], faults=1)
    cell = base["cells"]["lia-n2-both"]
    assert len(cell["mbit"]) == 9 and 5.0 not in cell["mbit"] and cell["cc_fault"] == 1 and cell["samples"] == 10
    assert cell["energy_j"] == [50.0] * 9  # the faulty sample's energy is not taken either
    # 3 of 10 against 1 of 10: within chance (p = 0.29); the held-out samples' 5 Mbit/s fail nothing.
    some = compare(base, campaign([10.0, 9.95, 10.05, 10.0, 9.9, 10.1, 10.0], faults=3))["lia-n2-both"]
    assert some["holds"] and (some["cc_fault"], some["base_cc_fault"]) == (3, 1), some["why"]
    clean = campaign([10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0, 10.1, 9.9, 10.0])
    many = compare(clean, campaign([10.0, 9.95, 10.05, 10.0], faults=6))["lia-n2-both"]
    assert not many["holds"] and "6 of 10 samples cc-fault (S = 1: 0 of 10; p = 0.005)" in many["why"], many["why"]


def test_the_runner_starts_a_window_at_the_first_look_that_saw_a_data_packet():
    """Below one data packet of growth (1.5 kB: iperf3's exchanges before the data bring about 0.8 kB) the data
    has not begun; the first look at or above it starts the window and pins a reading of that receiver's meter
    alone. A receiver that cannot be read is let go (its window then ends at the exit)."""
    from harness.campaign.runner import DATA_BYTES, ReceiverOutcome, Runner
    from harness.testbeds.emulated import received_bytes

    text = ("Inter-|   Receive  |  Transmit\n face |bytes packets|bytes packets\n"
            "    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n"
            " wlan0: 5000 4 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n"
            "  lte0: 700 2 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n")
    assert received_bytes(text, {"wlan0", "lte0"}) == 5700

    class Recorder:
        pinned: list = []

        def poll_now(self, names=None):
            self.pinned.append(list(names))

    class Fake:
        recorder = Recorder()

    seq = iter([100, 100 + 800, 100 + DATA_BYTES - 1, 100 + DATA_BYTES + 1514])

    def gone():
        raise OSError("no such process")

    outs = {"n1": ReceiverOutcome("n1"), "n2": ReceiverOutcome("n2")}
    probes = {"n1": (lambda: next(seq), 100), "n2": (gone, 0)}
    looks = []
    for _ in range(3):
        Runner._look_for_data(Fake(), probes, outs)
        looks.append(outs["n1"].no_data_until)
    assert "n2" not in probes and outs["n2"].no_data_until is None  # unreadable: let go at once
    assert outs["n1"].data_seen_at is None and None not in looks and looks == sorted(looks)
    Runner._look_for_data(Fake(), probes, outs)
    assert outs["n1"].data_seen_at >= outs["n1"].no_data_until == looks[2]
    assert probes == {} and Recorder.pinned == [["n1"]]


def test_the_pause_between_samples_is_testbed_time(monkeypatch):
    """A scenario's settle_s is scaled with the rest: at S = 8 a 2 s pause is 0.25 s of wall time in the
    runner's sleep and in the estimate, not 2 s, which at S = 8 would be 16 s of the testbed's time."""
    from types import SimpleNamespace

    from harness.campaign.campaign import TAIL_SKIP_S, between_samples_s
    from harness.campaign.runner import Runner
    slept = []
    monkeypatch.setattr("harness.campaign.runner.time.sleep", slept.append)
    Runner.settle(SimpleNamespace(scenario=SimpleNamespace(settle_s=2.0),
                                  testbed=SimpleNamespace(speedup=8.0, qdisc_stats=lambda: {}), DRAIN_S=Runner.DRAIN_S))
    assert slept == [0.25]
    sc = parse_model(Scenario, {"name": "p", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["wifi"], "samples_per_case": 1, "file_size": "1M", "settle_s": 2.0}, "t")
    at8 = sc.model_copy(update={"speedup": 8.0})
    assert between_samples_s(sc, emulated=True) == pytest.approx(TAIL_SKIP_S + 0.5 + 2.0)
    assert between_samples_s(at8, emulated=True) == pytest.approx((TAIL_SKIP_S + 2.0) / 8 + 0.5)
