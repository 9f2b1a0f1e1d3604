"""Parallel testbeds on one machine (`mplab run --testbeds K`): one campaign, one store, every sample once."""
from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import default_sigint, small_inventory

from harness.campaign import parallel
from harness.campaign.campaign import resume_campaign, start_campaign
from harness.campaign.plan import SamplePlan, plan_campaign
from harness.campaign.store import Campaign
from harness.config.scenario import Scenario
from harness.errors import Busy, ConfigError
from harness.upkeep import claim as claims
from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.hosts.local import LocalHost


def _scenario(name: str, samples: int, policies: list[str] | None = None) -> Scenario:
    return Scenario(name=name, congestion_controls=["cubic"], receiver_counts=[1], modes=["wifi", "lte"],
                    samples_per_case=samples, file_size="1M", transfer_timeout_s=30, retries=1, settle_s=0, seed=3,
                    policies=policies or [])


def _plans(n: int) -> list[SamplePlan]:
    return [SamplePlan(f"c-s{i:03d}", "c", "cubic", 1, "wifi", i, ("n1",)) for i in range(n)]


# ---------------------------------------------------------------- no root

def test_copies_have_their_own_prefixes(prefix):
    inv = small_inventory(prefix, [(10, 8)])
    copies = parallel.testbed_copies(inv, 3)
    assert [c.emulation.namespace_prefix for c in copies] == [f"{prefix}tb1-", f"{prefix}tb2-", f"{prefix}tb3-"]
    assert all(c.receivers == inv.receivers for c in copies)
    assert parallel.testbed_copies(inv, 1) == [inv]  # K = 1: the inventory itself, prefix unchanged


def test_testbeds_beyond_the_rule_are_refused_unless_forced():
    limit = parallel.max_testbeds(cpus=2)
    assert limit == int(2 / parallel.CORES_PER_TESTBED)
    parallel.check_testbeds(limit, cpus=2)
    with pytest.raises(ConfigError, match="sustains"):
        parallel.check_testbeds(limit + 1, cpus=2)
    parallel.check_testbeds(limit + 1, force=True, cpus=2)
    with pytest.raises(ConfigError):
        parallel.check_testbeds(0, force=True)


def test_queue_runs_every_plan_once_in_order_across_workers():
    plans = _plans(40)
    ran: list[tuple[str, str]] = []
    lock = threading.Lock()

    def worker(name):
        def one(p):
            time.sleep(0.001)
            with lock:
                ran.append((name, p.sample_id))
            return p.sample_id
        return one

    done = []
    errors = parallel.run_queue(plans, {"a": worker("a"), "b": worker("b"), "c": worker("c")}, threading.Event(),
                                done.append)
    assert not errors
    assert sorted(done) == sorted(p.sample_id for p in plans)
    for name in "abc":  # each testbed takes its samples in plan order (the queue is the plan)
        mine = [sid for n, sid in ran if n == name]
        assert mine == sorted(mine)
    assert len({name for name, _ in ran}) == 3


def test_queue_a_failing_worker_leaves_its_samples_to_the_others():
    plans = _plans(10)
    done = []

    def broken(p):
        raise OSError("testbed lost")

    errors = parallel.run_queue(plans, {"bad": broken, "good": lambda p: p.sample_id}, threading.Event(),
                                done.append)
    assert [type(e) for e in errors] == [OSError]
    # The sample the broken testbed took is not run by anyone (it has no record; resume runs it).
    assert len(done) == 9 and len(set(done)) == 9


def test_queue_stop_ends_workers_between_samples():
    stop = threading.Event()
    done = []

    def one(p):
        stop.set()
        return p.sample_id

    parallel.run_queue(_plans(10), {"a": one}, stop, done.append)
    assert done == ["c-s000"]


def test_interference_summary_per_testbed(prefix):
    inv = small_inventory(prefix, [(10, 8)])
    recs = [
        {"sample_id": "a", "receiver": "n1", "mode": "wifi", "n_receivers": 1, "status": "ok",
         "throughput_mbit": 9.0, "started_at": 100.0, "testbed": "x"},
        {"sample_id": "b", "receiver": "n1", "mode": "lte", "n_receivers": 1, "status": "ok",
         "throughput_mbit": 4.0, "started_at": 101.0, "testbed": "y"},
    ]
    with parallel.Interference(interval_s=0.05) as itf:
        time.sleep(0.2)
    s = itf.summary(recs, inv)
    assert s["testbeds"]["x"]["rate_ratio_mean"] == pytest.approx(0.9)
    assert s["testbeds"]["y"]["rate_ratio_mean"] == pytest.approx(0.5)
    assert s["cpu_busy_mean"] is not None and 0 <= s["cpu_busy_mean"] <= 1


# ---------------------------------------------------------------- real testbeds

def _check_exactly_once(campaign: Campaign) -> list[dict]:
    recs = campaign.records()
    per_sample = collections.Counter(r["sample_id"] for r in recs)
    assert sorted(per_sample) == sorted(campaign.manifest["plan"]), "every planned sample, nothing else"
    assert set(per_sample.values()) == {1}, "one receiver per sample: one record each, no duplicates"
    return recs


@pytest.mark.root
def test_two_parallel_testbeds_record_every_sample_once(tmp_path, prefix):
    inv = small_inventory(prefix, [(10, 8)])
    sc = _scenario("par", 3)
    try:
        c = start_campaign(sc, inv, tmp_path, campaign_id="par", testbeds=2, force=True)
    finally:
        clean_prefix(prefix)
    recs = _check_exactly_once(c)
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert {r["testbed"] for r in recs} == {f"{prefix}tb1-", f"{prefix}tb2-"}
    (itf,) = c.manifest["interference"]
    assert itf["n_testbeds"] == 2 and set(itf["testbeds"]) == {f"{prefix}tb1-", f"{prefix}tb2-"}
    assert all(t["rate_ratio_mean"] > 0.5 for t in itf["testbeds"].values()), itf
    assert not list_namespaces(LocalHost("root"), prefix)


@pytest.mark.root
def test_policies_on_two_testbeds_each_copy_steered_by_its_own_controller(tmp_path, prefix):
    """A policy scenario at --testbeds 2: one controller per copy, each steering its own AP and eNB."""
    from controller.setup2 import control_factory

    built = []

    def factory(scenario: Scenario, source: str):
        built.append(control_factory(scenario, source))
        return built[-1]

    # WiFi (DCF) gives both receivers ~8.6 Mbit/s, LTE each its own rate: 1 MiB in about a second either way.
    inv = small_inventory(prefix, [(20, 15), (15, 20)])
    sc = Scenario(name="pol", congestion_controls=["cubic"], receiver_counts=[2], modes=[],
                  policies=["all-wifi", "all-lte"], samples_per_case=1, file_size="1M", transfer_timeout_s=30,
                  retries=1, settle_s=0, seed=3, control={"steering": "nftables"})
    try:
        c = start_campaign(sc, inv, tmp_path, campaign_id="pol", testbeds=2, force=True, control_factory=factory)
    finally:
        clean_prefix(prefix)
    copies = {f"{prefix}tb1-", f"{prefix}tb2-"}
    assert len(built) == 2 and {ctl.testbed.prefix for ctl in built} == copies, "one controller per copy"
    recs = c.records()
    per_sample = collections.Counter(r["sample_id"] for r in recs)
    assert sorted(per_sample) == sorted(c.manifest["plan"]) and set(per_sample.values()) == {2}
    assert {r["testbed"] for r in recs} == copies  # one sample each: both queue workers start at once
    for r in recs:
        assert r["status"] == "ok", r["error"]
        decided = r["policy"].removeprefix("all-")
        other = "lte" if decided == "wifi" else "wifi"
        assert r["assignment"] == r["mode"] == decided and r["steering"] == "nftables", r
        # Steered on the copy that ran it: the blocked network carried (almost) nothing to this receiver.
        assert r["iface_bytes"][decided] >= 2**20 and r["iface_bytes"][other] < 64 * 1024, (r["testbed"], r)
        assert not [f for f in r["flags"] if f.startswith(("path-leak", "path-idle"))], r["flags"]
    assert c.manifest["control"]["steering"] == "nftables"
    assert c.manifest["control"]["instances"].startswith("one per testbed"), c.manifest["control"]
    assert not list_namespaces(LocalHost("root"), prefix)


def _start_cli(tmp_path: Path, inv, samples: int, policies: list[str] | None = None) -> tuple[subprocess.Popen, Path]:
    """`mplab run --testbeds 2` in its own session; returns it once both copies have recorded a sample."""
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump(_scenario("cli", samples, policies).model_dump(mode="json")))
    mplab = Path(sys.executable).parent / "mplab"
    argv = [str(mplab), "run", str(tmp_path / "sc.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
            "--runs-dir", str(tmp_path / "runs"), "--id", "k", "--testbeds", "2", "--force"]
    samples_path = tmp_path / "runs" / "k" / "samples.jsonl"
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_sigint)  # the test SIGINTs it, whatever started the suite
    deadline = time.monotonic() + 120
    while True:  # until both copies have recorded a sample
        lines = samples_path.read_text().splitlines() if samples_path.exists() else []
        if len({json.loads(x)["testbed"] for x in lines}) == 2:
            return proc, tmp_path / "runs" / "k"
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no records from both testbeds within 120 s"
        time.sleep(0.05)


@pytest.mark.root
def test_a_live_claim_on_one_copy_refuses_the_parallel_campaign(tmp_path, prefix):
    """Each copy claims its own prefix: another live holder of the second copy's is named, nothing is built."""
    inv = small_inventory(prefix, [(10, 8)])
    other = claims.PrefixClaim(f"{prefix}tb2-", "campaign someone-else")
    other.acquire()
    try:
        with pytest.raises(Busy, match="someone-else"):
            start_campaign(_scenario("busy", 2), inv, tmp_path, campaign_id="busy", testbeds=2, force=True)
        assert not list_namespaces(LocalHost("root"), prefix)
        assert claims.holder(f"{prefix}tb1-") is None  # the first copy's claim was given back
        assert not (tmp_path / "busy").exists()
    finally:
        other.release()
        clean_prefix(prefix)


@pytest.mark.root
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_every_testbed_and_keeps_what_is_recorded(tmp_path, prefix, signum):
    inv = small_inventory(prefix, [(10, 8)])
    proc = None
    try:
        proc, path = _start_cli(tmp_path, inv, 10)
        t0 = time.monotonic()
        os.kill(proc.pid, signum)
        rc = proc.wait(60)
        stopped_s = time.monotonic() - t0
        # Every copy was torn down by the interrupted process itself.
        left = list_namespaces(LocalHost("root"), prefix)
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        clean_prefix(prefix)
    assert rc == 128 + signum, proc.stderr.read().decode()[-2000:]  # docs/exit-codes.md: 143 / 130
    assert not left, left
    assert stopped_s < 30, f"took {stopped_s:.1f} s to stop"
    c = Campaign.open(path)
    events = [json.loads(x) for x in (path / "sessions.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "interrupted"
    assert events[-1]["signal"] == signal.Signals(signum).name
    # Each copy claimed its own prefix and gave it up.
    copies = c.manifest["parallel"]["names"]
    assert len(copies) == 2 and all(n.startswith(prefix) for n in copies)
    assert [claims.holder(n) for n in copies] == [None, None]
    so_far = collections.Counter(r["sample_id"] for r in c.records())
    assert set(so_far.values()) == {1}
    assert len(so_far) < len(c.manifest["plan"]), "the copies went on taking samples after SIGTERM"


@pytest.mark.root
def test_killed_parallel_campaign_resumes_on_one_testbed(tmp_path, prefix):
    """With a policy among the modes: each killed copy's controller left its rules behind; the resumed one
    steers its own testbed."""
    from controller.setup2 import control_factory

    inv = small_inventory(prefix, [(10, 8)])
    proc = None
    try:
        proc, _ = _start_cli(tmp_path, inv, 3, ["all-lte"])
        os.kill(proc.pid, signal.SIGKILL)  # a crash: no clean-up, namespaces and meter devices left behind
        proc.wait(10)
        c = Campaign.open(tmp_path / "runs" / "k")
        before = c.records()
        assert len({r["sample_id"] for r in before}) < len(c.manifest["plan"]), "killed too late to test resume"
        c = resume_campaign(tmp_path / "runs" / "k", testbeds=1, control_factory=control_factory)
        # What the killed copies left is gone (resume removed it, not this test's clean-up).
        assert not [n for n in list_namespaces(LocalHost("root"), prefix) if "tb" in n]
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        clean_prefix(prefix)
    recs = _check_exactly_once(c)
    assert before == recs[:len(before)], "records of the killed session are kept as they were"
    assert {r["testbed"] for r in recs} == {f"{prefix}tb1-", f"{prefix}tb2-", prefix}
    events = [json.loads(x) for x in (c.path / "sessions.jsonl").read_text().splitlines()]
    assert [e.get("testbeds") for e in events if e["event"] in ("start", "resume")] == [
        [f"{prefix}tb1-", f"{prefix}tb2-"], [prefix]]
    # The same seeded, shuffled plan whatever K ran it.
    assert c.manifest["plan"] == [p.sample_id for p in plan_campaign(_scenario("cli", 3, ["all-lte"]), inv)]
    policy = [r for r in recs if r["policy"] is not None]
    assert len(policy) == 3 and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert all(r["assignment"] == r["mode"] == "lte" and r["iface_bytes"]["wifi"] < 64 * 1024 for r in policy), policy
