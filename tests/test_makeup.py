"""`mplab run --resume CAMPAIGN --make-up`: the samples a campaign's short cases lack, added to its plan.

A campaign of the quick scenario (15 cases x 2 samples, 3 receivers) whose records are synthetic (the runner's
schema, ``rigs.synthetic``): one sample failed, one has a flagged record, one has not run. Nothing here needs
root; the added samples' run on the emulated testbed is pinned in test_emulation.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO
from harness.campaign.campaign import campaign_inputs, pending_plans
from harness.campaign.entry import RunOptions, run_campaign
from harness.campaign.makeup import make_up, plan_make_up
from harness.campaign.plan import plan_campaign, select_receivers
from harness.campaign.store import MAKE_UP_FILE, Campaign
from harness.config.inventory import load_inventory
from harness.config.scenario import load_scenario, scenario_inventory
from harness.dataset.build import SplitSpec, collect_rows
from harness.errors import ConfigError, StoreError
from rigs.synthetic import synthetic_records

QUICK = REPO / "scenarios" / "quick.yaml"
FAILED, FLAGGED, PENDING = "lia-n3-both-s002", "cubic-n3-wifi-s001", "olia-n3-lte-s002"


def _records(campaign: str, sample_ids: list[str]) -> list[dict]:
    """Synthetic records of ``sample_ids`` (any index: the generator's, renumbered)."""
    out = []
    for sid in sample_ids:
        case, _, index = sid.rpartition("-s")
        cc, n, mode = case.split("-")
        for r in synthetic_records(campaign, ccs=(cc,), counts=(int(n[1:]),), modes=(mode,), samples=1):
            out.append({**r, "sample_id": sid, "sample_index": int(index)})
    return out


def _fail(recs: list[dict]) -> list[dict]:
    return [{**r, "status": "failed", "sample_status": "failed", "error": "timeout: no result after 60 s",
             "energy_j": None} for r in recs]


@pytest.fixture
def campaign(tmp_path) -> Campaign:
    scenario = load_scenario(QUICK)
    inventory = load_inventory(scenario_inventory(scenario, QUICK))
    plan = [p.sample_id for p in plan_campaign(scenario, inventory)]
    c = Campaign.create(tmp_path, "quick-t", {"scenario": scenario.model_dump(mode="json"),
                                              "inventory": inventory.model_dump(mode="json"), "plan": plan,
                                              "testbed": {"kind": "emulated"}})
    for sid in plan:
        if sid == PENDING:
            continue
        recs = _records(c.id, [sid])
        if sid == FAILED:
            recs = _fail(recs)
        if sid == FLAGGED:
            recs[1]["flags"] = ["cc-fault: n2 subflow 10.0.1.2:5201 had slow-start threshold 0x81104110"]
        c.append(recs)
    return c


def test_each_short_case_gets_as_many_samples_as_it_lacks_a_pending_one_counts_as_usable(campaign):
    added = plan_make_up(campaign, load_scenario(QUICK))
    assert added.short == {"lia-n3-both": 1, "cubic-n3-wifi": 1}   # not olia-n3-lte: its s002 has not run
    assert sorted(added.samples) == ["cubic-n3-wifi-s003", "lia-n3-both-s003"]
    assert not (campaign.path / MAKE_UP_FILE).exists()   # planning writes nothing


def test_a_make_up_joins_the_plan_runs_as_pending_and_its_records_are_the_campaigns(campaign):
    scenario, inventory = campaign_inputs(campaign)
    before = len(campaign.plan)
    added = make_up(campaign, scenario)
    assert Campaign.open(campaign.path).plan == campaign.plan[:before] + added.samples
    pending = {p.sample_id: p for p in pending_plans(campaign, scenario, inventory)}
    assert set(pending) == {PENDING, *added.samples}
    p = pending["lia-n3-both-s003"]
    names = [r.name for r in inventory.receivers]
    assert (p.case_id, p.cc, p.n_receivers, p.mode, p.index, p.policy) == ("lia-n3-both", "lia", 3, "both", 3, None)
    assert p.receivers == select_receivers(names, 3, 3, scenario.receiver_selection)
    # Asked again while they are pending: nothing more (they count as usable until they run).
    assert make_up(campaign, scenario).samples == []
    # The made-up samples' records are the campaign's (not damaged), and a dataset takes them in.
    campaign.append(_records(campaign.id, ["lia-n3-both-s003"]))
    campaign.append(_fail(_records(campaign.id, ["cubic-n3-wifi-s003"])))
    assert campaign.damaged() == [] and {"lia-n3-both-s003", "cubic-n3-wifi-s003"} <= campaign.completed()
    rows, excluded, _ = collect_rows([campaign], SplitSpec(train=1, test=1, seed=0))
    assert {r["sample_id"] for r in rows if r["case_id"] == "lia-n3-both"} == {"lia-n3-both-s001",
                                                                             "lia-n3-both-s003"}
    assert excluded["sample failed"] == 2 * 3
    # The one that failed again is short again, with the next index; the filled one is not.
    again = make_up(campaign, scenario)
    assert again.short == {"cubic-n3-wifi": 1} and again.samples == ["cubic-n3-wifi-s004"]
    assert [len(e["samples"]) for e in campaign.make_ups()] == [2, 1]


def test_a_record_of_no_planned_sample_is_still_damaged(campaign):
    make_up(campaign, load_scenario(QUICK))
    campaign.append(_records(campaign.id, ["lia-n3-both-s009"]))
    assert [d.reason for d in campaign.damaged()] == ["sample_id 'lia-n3-both-s009' is not in the campaign's plan"] * 3


@pytest.mark.parametrize("line, says", [
    ('{"samples": ["ghost-n3-both-s003"]}', "not <case>-s<index> of a case of the campaign's plan"),
    ('{"samples": ["lia-n3-both-s0003"]}', "not <case>-s<index>"),
    ('{"samples": ["lia-n3-both-s003\\n"]}', "not <case>-s<index>"),
    ('{"schema_version": 99, "samples": ["lia-n3-both-s003"]}', "newer than this mplab"),
    ("[" * 100_000 + "]" * 100_000, "not a line of samples added to the plan"),
    ('{"samples": ["lia-n3-both-s001"]}', "already in the plan"),
    ('{"samples": "lia-n3-both-s003"}', 'no "samples" list'),
    ("not json", "not a line of samples added to the plan"),
])
def test_a_bad_make_up_line_is_named_never_read_as_a_plan(campaign, line, says):
    (campaign.path / MAKE_UP_FILE).write_text(line + "\n")
    with pytest.raises(StoreError, match=f"{MAKE_UP_FILE}:1: .*{says}"):
        campaign.make_ups()


def test_a_make_up_line_a_crash_cut_short_is_left_out_then_cut_off(campaign):
    scenario = load_scenario(QUICK)
    (campaign.path / MAKE_UP_FILE).write_text('{"samples": ["lia-n3-both-s00')
    assert campaign.make_ups() == [] and PENDING in campaign.plan
    added = make_up(campaign, scenario)
    lines = (campaign.path / MAKE_UP_FILE).read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["samples"] == added.samples


def test_a_resumes_dry_run_says_what_it_would_run_and_runs_and_writes_nothing(campaign):
    samples = campaign.samples_path.read_bytes()
    dry = run_campaign(RunOptions(resume=campaign.path, dry_run=True, make_up=True)).dry_run
    assert dry is not None and dry.campaign.id == campaign.id
    assert sorted(p.sample_id for p in dry.plans) == ["cubic-n3-wifi-s003", "lia-n3-both-s003", PENDING]
    assert dry.planned == len(campaign.plan) + 2 and dry.eta_s > 0
    assert campaign.samples_path.read_bytes() == samples and not (campaign.path / MAKE_UP_FILE).exists()
    assert not (campaign.path / "sessions.jsonl").exists()
    plain = run_campaign(RunOptions(resume=campaign.path, dry_run=True)).dry_run
    assert [p.sample_id for p in plain.plans] == [PENDING] and plain.make_up is None


def test_make_up_without_resume_is_a_usage_error():
    with pytest.raises(ConfigError, match="--make-up .* with --resume"):
        run_campaign(RunOptions(scenario=QUICK, make_up=True, dry_run=True))


def test_the_command_line_resumes_dry_without_running_and_refuses_make_up_alone(campaign):
    cmd = [sys.executable, "-m", "mplab", "run", "--resume", str(campaign.path), "--make-up", "--dry-run"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "make-up: 2 sample(s) would be added to 2 short case(s): cubic-n3-wifi 1, lia-n3-both 1" in out
    assert "resuming would run 3 of its 32 planned samples" in out
    assert not (campaign.path / "sessions.jsonl").exists()
    res = subprocess.run([sys.executable, "-m", "mplab", "run", str(QUICK), "--make-up"], capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--make-up adds samples to a campaign's short cases" in " ".join(res.stderr.split())


def test_an_added_sample_never_takes_an_id_something_was_written_under(campaign):
    """A damaged line (a record of no planned sample, e.g. from before a lost makeup.jsonl) and a raw directory
    keep their ids: the added sample takes the next free index, so those records never become the campaign's."""
    campaign.append(_records(campaign.id, ["lia-n3-both-s003"]))   # not in the plan: damaged
    (campaign.path / "raw" / ".partial-lia-n3-both-s004").mkdir(parents=True)
    added = make_up(campaign, load_scenario(QUICK))
    assert "lia-n3-both-s005" in added.samples and "lia-n3-both-s003" not in added.samples
    assert len(campaign.damaged()) == 3 and "lia-n3-both-s003" not in campaign.completed()


def test_status_counts_the_added_samples_and_the_live_page_knows_their_receivers(campaign):
    from harness.campaign.status import campaign_status
    from harness.watch.state import CampaignView

    view = CampaignView(campaign.path, campaign.manifest)
    assert "lia-n3-both-s003" not in view.receivers
    added = make_up(campaign, load_scenario(QUICK))
    st = campaign_status(Campaign.open(campaign.path))
    assert st["planned"] == 30 + 2 and st["pending"] == 1 + 2
    view.poll()
    assert len(view.plan) == 32 and view.receivers["lia-n3-both-s003"] == ["n1", "n2", "n3"]
    assert set(added.samples) <= set(view.plan)


def test_a_nodes_scratch_campaign_takes_the_added_samples_records_as_its_own(tmp_path, campaign):
    from harness.campaign.cluster import shard_manifest

    added = make_up(campaign, load_scenario(QUICK))
    shard = [added.samples[0], PENDING]
    scratch = Campaign.create(tmp_path / "node", campaign.id, shard_manifest(campaign.manifest, shard))
    assert scratch.plan == campaign.manifest["plan"] + [added.samples[0]]
    scratch.append(_records(campaign.id, shard))
    assert scratch.damaged() == [] and scratch.completed() == set(shard)


def test_a_failed_sample_stops_counting_as_a_failure_once_its_case_is_made_up(campaign):
    """What `--resume --make-up` exits 3 for: the failed samples of cases still short after its run."""
    from harness.campaign.makeup import failed_in_short_cases

    scenario = load_scenario(QUICK)
    assert failed_in_short_cases(campaign, scenario) == [FAILED]
    added = make_up(campaign, scenario)
    (again,) = [sid for sid in added.samples if sid.startswith("lia-n3-both")]
    campaign.append(_fail(_records(campaign.id, [again])))
    assert failed_in_short_cases(campaign, scenario) == sorted([FAILED, again])
    campaign.append(_records(campaign.id, [make_up(campaign, scenario).samples[0]]))
    assert failed_in_short_cases(campaign, scenario) == []


def test_status_names_the_short_cases_and_the_command_once_nothing_is_pending(campaign):
    def status() -> str:
        res = subprocess.run([sys.executable, "-m", "mplab", "status", str(campaign.path)], capture_output=True,
                             text=True, timeout=120, cwd=REPO)
        assert res.returncode == 0, res.stderr
        return " ".join(res.stdout.split())
    assert "short of usable samples" not in status()   # a sample is pending: resume first
    campaign.append(_records(campaign.id, [PENDING]))
    assert (f"2 case(s) short of usable samples (2 in all; failed or flagged): mplab run --resume {campaign.path} "
            "--make-up") in status()


def test_an_added_samples_receivers_and_case_are_its_own_index_s_under_rotate_and_in_a_policy_case():
    """``plan_samples`` for ids beyond the plan: a policy case, a four-digit index, and receivers rotated by the
    added sample's own index (as the planner rotates any sample's)."""
    from harness.campaign.plan import plan_samples
    from harness.campaign.store import split_sample_id
    from harness.config.scenario import Scenario
    from rigs.inventories import small_inventory

    inv = small_inventory("mplab-x-", [(10, 10)] * 4)
    sc = Scenario.model_validate({"name": "r", "congestion_controls": ["cubic"], "receiver_counts": [2],
                                  "modes": ["wifi"], "policies": ["ref-is"], "model": "/nonexistent/model",
                                  "samples_per_case": 2, "file_size": "1M", "receiver_selection": "rotate"})
    base = {p.sample_id for p in plan_campaign(sc, inv)}
    policy_case = next(p.case_id for p in plan_campaign(sc, inv) if p.policy)
    ids = ["cubic-n2-wifi-s003", "cubic-n2-wifi-s1000", f"{policy_case}-s007"]
    assert not base & set(ids)
    wifi3, wifi1000, pol7 = plan_samples(sc, inv, ids)
    names = [r.name for r in inv.receivers]
    assert (wifi3.index, wifi3.mode, wifi3.receivers) == (3, "wifi", select_receivers(names, 2, 3, "rotate"))
    assert wifi3.receivers != select_receivers(names, 2, 1, "rotate")   # not the first sample's
    assert wifi1000.index == 1000 and split_sample_id("cubic-n2-wifi-s1000") == ("cubic-n2-wifi", 1000)
    assert (pol7.case_id, pol7.policy, pol7.mode, pol7.index) == (policy_case, "ref-is", "both", 7)
    with pytest.raises(ConfigError, match="of no case"):
        plan_samples(sc, inv, ["reno-n2-wifi-s003"])
