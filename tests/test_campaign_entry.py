"""The one campaign entry point (``harness.campaign.entry.run_campaign``): refusals first, then one way
through scenario -> inventory -> plan. Dry runs only: nothing here needs root or builds a testbed
(the runs themselves are pinned by the `mplab run` tests: test_parallel, test_speedup, faults/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from harness.campaign.campaign import queue_makespan_s, sample_estimates_s
from harness.campaign.entry import RunOptions, check_options, run_campaign
from harness.campaign.plan import plan_campaign
from harness.config.inventory import load_inventory
from harness.config.scenario import load_scenario, scenario_inventory
from harness.errors import ConfigError

QUICK = REPO / "scenarios" / "quick.yaml"
MISSING = Path("/nonexistent/scenario.yaml")


@pytest.mark.parametrize("options, says", [
    (RunOptions(), "missing scenario"),
    (RunOptions(scenario=MISSING, resume=Path("/nonexistent/run")), "either a scenario or --resume"),
    (RunOptions(resume=Path("/nonexistent/run"), speedup="4"), "drop --speedup"),
    (RunOptions(scenario=MISSING, cluster="ray://x:10001", testbeds=2), "--testbeds or --cluster"),
])
def test_option_pairs_are_refused_before_any_file_is_read(options, says):
    # The paths do not exist: a refusal that read them first would name them instead.
    with pytest.raises(ConfigError, match=says):
        run_campaign(options)
    with pytest.raises(ConfigError, match=says):
        check_options(options)


def test_a_bad_campaign_id_is_refused_before_the_scenario_is_read():
    with pytest.raises(ConfigError, match="campaign id"):
        run_campaign(RunOptions(scenario=MISSING, campaign_id="../escape", dry_run=True))


def test_a_dry_run_reads_scenario_then_inventory_plans_and_builds_nothing(tmp_path):
    out = run_campaign(RunOptions(scenario=QUICK, runs_dir=tmp_path / "runs", dry_run=True))
    assert out.campaign is None and out.dry_run is not None
    sc = load_scenario(QUICK)
    inv = load_inventory(scenario_inventory(sc, QUICK))
    assert [p.sample_id for p in out.dry_run.plans] == [p.sample_id for p in plan_campaign(sc, inv, str(QUICK))]
    assert out.dry_run.inventory.name == inv.name and out.dry_run.scenario.name == sc.name
    assert out.dry_run.eta_s > 0
    assert not (tmp_path / "runs").exists()


def test_on_parallel_testbeds_the_estimate_deals_samples_from_one_queue_as_the_runner_does():
    # The runner's copies each take the next sample as they fall free (parallel.run_queue): a long sample
    # dealt last keeps one copy busy while the other idles, which total / K does not see.
    assert queue_makespan_s([10, 1, 1, 1], 2) == 10
    assert queue_makespan_s([1, 1, 1, 10], 2) == 11
    assert queue_makespan_s([3, 3, 3, 3], 2) == 6 and queue_makespan_s([1, 2, 3], 1) == 6
    one = run_campaign(RunOptions(scenario=QUICK, dry_run=True)).dry_run
    two = run_campaign(RunOptions(scenario=QUICK, dry_run=True, testbeds=2)).dry_run
    assert two.eta_s == pytest.approx(one.eta_s)  # the one-testbed figure does not move
    per = sample_estimates_s(two.plans, two.scenario, two.inventory)
    assert sum(per) == pytest.approx(one.eta_s)
    assert two.eta_testbeds_s == pytest.approx(queue_makespan_s(per, 2))
    assert one.eta_s / 2 <= two.eta_testbeds_s < one.eta_s


def test_the_inventory_option_wins_over_the_scenarios():
    emulated = REPO / "inventory" / "emulated.yaml"
    assert load_inventory(scenario_inventory(load_scenario(QUICK), QUICK)).name != load_inventory(emulated).name
    out = run_campaign(RunOptions(scenario=QUICK, inventory=emulated, dry_run=True))
    assert out.dry_run.inventory.name == load_inventory(emulated).name


def test_speedup_auto_is_read_from_the_table_and_said(tmp_path):
    table = tmp_path / "speedup.json"
    sc = load_scenario(QUICK)
    table.write_text(json.dumps({"highest": {cc: 4.0 for cc in sc.congestion_controls}}))
    heard: list[str] = []
    out = run_campaign(RunOptions(scenario=QUICK, speedup="auto", speedup_table=table, dry_run=True),
                       note=heard.append)
    assert out.dry_run.scenario.speedup == 4.0 and out.dry_run.scenario.speedup_by_mode is None  # one S for all
    assert [h.split(" (")[0] for h in heard] == [f"--speedup auto: {m} 4" for m in sc.modes]  # said per mode
    fast = out.dry_run.eta_s
    slow = run_campaign(RunOptions(scenario=QUICK, dry_run=True)).dry_run.eta_s
    assert fast < slow  # the estimate runs at the scaled speed


def test_a_policy_scenario_without_a_controller_is_refused_at_the_dry_run():
    with pytest.raises(ConfigError, match="no controller was given"):
        run_campaign(RunOptions(scenario=REPO / "scenarios" / "quick-setup2.yaml", dry_run=True))
