"""One live testbed per namespace prefix; signals at any time leave nothing behind.

Root-only: these build real namespaces, each test under its own prefix.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.testbeds.emulated import EmulatedTestbed
from harness.errors import MplabError
from harness.hosts.local import LocalHost
from tests.conftest import default_sigint, small_inventory

from .conftest import REPO

pytestmark = pytest.mark.root


def _files(tmp_path, prefix, samples=3):
    inv = small_inventory(prefix, [(20, 8)])
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    sc = {"name": "sig", "inventory": str(inv_path), "congestion_controls": ["cubic"], "receiver_counts": [1],
          "modes": ["wifi"], "samples_per_case": samples, "file_size": "1M", "settle_s": 0}
    sc_path = tmp_path / "sc.yaml"
    sc_path.write_text(yaml.safe_dump(sc))
    return inv, sc_path


def test_second_testbed_on_a_live_prefix_is_refused_naming_the_holder(prefix):
    inv = small_inventory(prefix, [(20, 8)])
    first = EmulatedTestbed(inv)
    try:
        first.claim("campaign first-c")
        first.setup([])
        before = sorted(list_namespaces(LocalHost("root"), prefix, nested=False))
        second = EmulatedTestbed(inv)
        with pytest.raises(MplabError, match=r"campaign first-c \(pid \d+") as info:
            second.setup([])
        assert type(info.value).__name__ == "Busy" and info.value.exit_code == 5
        assert sorted(list_namespaces(LocalHost("root"), prefix, nested=False)) == before  # untouched
        second.teardown()  # the refused one's teardown must not touch the live one either
        assert sorted(list_namespaces(LocalHost("root"), prefix, nested=False)) == before
    finally:
        first.teardown()
        clean_prefix(prefix, nested=False)
    assert list_namespaces(LocalHost("root"), prefix) == []
    third = EmulatedTestbed(inv)  # released: the prefix is free again
    third.claim("campaign third")
    third.release_claim()


def test_clean_leaves_a_prefix_another_process_holds(prefix):
    root = LocalHost("root")
    ns = f"{prefix}n1"
    root.run(["ip", "netns", "add", ns])
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from harness.upkeep.claim import PrefixClaim\n"
        f"c = PrefixClaim({prefix!r}, 'campaign held-c'); c.acquire()\n"
        "print('held', flush=True); time.sleep(60)\n")], cwd=REPO, stdout=subprocess.PIPE, text=True)
    done = []
    try:
        try:
            assert holder.stdout.readline().strip() == "held"
            done = clean_prefix(prefix)
            assert ns in list_namespaces(root, prefix)
            assert any("skipped" in d and "campaign held-c" in d for d in done)
        finally:
            holder.kill()
            holder.wait()
        done = clean_prefix(prefix)  # the holder died: its leftovers go
    finally:
        # Whatever failed above, the namespace this test made goes too (it once stayed behind after a failure).
        root.run(["ip", "netns", "del", ns], check=False)
    assert f"namespace {ns}" in done and list_namespaces(root, prefix) == []


@pytest.mark.parametrize("signum, code, says", [(signal.SIGTERM, 143, "stopped by SIGTERM"),
                                                 (signal.SIGINT, 130, "interrupted by Ctrl-C (SIGINT)")])
def test_signal_during_setup_tears_down_and_logs_the_reason(tmp_path, prefix, signum, code, says):
    inv, sc_path = _files(tmp_path, prefix)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc_path), "--runs-dir", str(runs),
                             "--id", "sig"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # the test SIGINTs it, whatever started the suite
    root = LocalHost("root")
    try:
        deadline = time.monotonic() + 60
        while not list_namespaces(root, prefix, nested=False):  # set-up has begun
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "set-up never started"
            time.sleep(0.01)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err[-2000:]
        assert says in err and "Traceback" not in err
        assert list_namespaces(root, prefix) == [], "namespaces left behind"
        events = [json.loads(line) for line in (runs / "sig" / "sessions.jsonl").read_text().splitlines()]
        assert events[-1]["event"] == "interrupted" and events[-1]["reason"] == says
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        clean_prefix(prefix, nested=False)


def test_started_with_sigint_ignored_mplab_keeps_ignoring_it_and_stops_on_sigterm(tmp_path, prefix):
    """A background job of a script (``cmd &``) starts with SIGINT ignored: mplab honours that (a Ctrl-C meant
    for the terminal's foreground job does not stop it) and stops cleanly on SIGTERM (docs/exit-codes.md)."""
    # Enough samples that the run is still going 2 s after the SIGINT (3 finished by then once emulated
    # radio tails stopped being waited out).
    inv, sc_path = _files(tmp_path, prefix, samples=40)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc_path), "--runs-dir", str(runs),
                             "--id", "ign"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    root = LocalHost("root")
    try:
        deadline = time.monotonic() + 60
        while not list_namespaces(root, prefix, nested=False):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "set-up never started"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        time.sleep(2.0)
        assert proc.poll() is None, "SIGINT stopped a run started with SIGINT ignored"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143 and "stopped by SIGTERM" in err and "Traceback" not in err, err[-2000:]
        assert list_namespaces(root, prefix) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        clean_prefix(prefix, nested=False)


def _campaign_args(tmp_path, prefix, samples=3):
    from harness.config.load import parse_model
    from harness.config.scenario import Scenario

    inv = small_inventory(prefix, [(20, 8)])
    sc = parse_model(Scenario, {"name": "flap", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["wifi"], "samples_per_case": samples, "file_size": "512K",
                                "settle_s": 0, "retries": 0,
                                # A broken receiver's meter reads nothing: its idle wait runs to this deadline.
                                "idle_timeout_s": 5}, "test")
    return sc, inv


def test_link_flap_is_repaired_before_the_next_sample(tmp_path, prefix):
    from harness.campaign.campaign import RunHooks, start_campaign

    sc, inv = _campaign_args(tmp_path, prefix)
    root = LocalHost("root")
    seen = []

    def flap(outcome):
        seen.append(outcome.plan.sample_id)
        if len(seen) == 1:
            for updown in ("down", "up"):
                root.run(["ip", "netns", "exec", f"{prefix}n1", "ip", "link", "set", "wlan0", updown])

    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="flap", hooks=RunHooks(on_sample=flap))
    finally:
        clean_prefix(prefix, nested=False)
    recs = c.records()
    assert [r["status"] for r in recs] == ["ok"] * 3, [r["error"] for r in recs]
    assert any("restored" in x["what"] and x["attempt"] == 1 for x in recs[1]["repairs"]), recs[1]["repairs"]
    assert recs[0]["repairs"] == [] and recs[2]["repairs"] == []


def test_a_repair_before_a_failed_attempt_is_in_the_record_of_the_attempt_that_succeeded(tmp_path, prefix,
                                                                                          monkeypatch):
    """The health check repairs a flapped link before attempt 1, attempt 1 then fails (its congestion control
    cannot be applied, once), attempt 2 succeeds: the record keeps attempt 1's repair (it used to say [])."""
    from harness.campaign.campaign import RunHooks, start_campaign
    from harness.config.load import parse_model
    from harness.config.scenario import Scenario
    from harness.errors import CommandError
    from harness.testbeds.emulated import EmulatedTestbed

    sc, inv = _campaign_args(tmp_path, prefix, samples=2)
    sc = parse_model(Scenario, {**sc.model_dump(mode="json"), "retries": 1}, "test")
    root = LocalHost("root")
    real_apply, real_health = EmulatedTestbed.apply_cc, EmulatedTestbed.check_health
    calls = {"health": 0, "apply": 0}

    def check_health(self, nodes):
        calls["health"] += 1
        if calls["health"] == 2:  # before the second sample's first attempt
            for updown in ("down", "up"):
                root.run(["ip", "netns", "exec", f"{prefix}n1", "ip", "link", "set", "wlan0", updown])
        return real_health(self, nodes)

    def apply_cc(self, cc, receivers):
        calls["apply"] += 1
        if calls["apply"] == 2:
            raise CommandError("test", ["tc"], 1, "refused once by the test")
        return real_apply(self, cc, receivers)

    monkeypatch.setattr(EmulatedTestbed, "check_health", check_health)
    monkeypatch.setattr(EmulatedTestbed, "apply_cc", apply_cc)
    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="again", hooks=RunHooks())
    finally:
        clean_prefix(prefix, nested=False)
    recs = c.records()
    assert [r["status"] for r in recs] == ["ok", "ok"], [r["error"] for r in recs]
    assert recs[1]["attempts"] == 2
    assert recs[1]["repairs"] and {x["attempt"] for x in recs[1]["repairs"]} == {1}, recs[1]["repairs"]
    assert any("restored" in x["what"] for x in recs[1]["repairs"])


def test_unrepairable_receiver_fails_its_samples_with_the_reason_and_run_exits_3(tmp_path, prefix):
    from harness.campaign.campaign import RunHooks, start_campaign
    from mplab.cli import run as mplab_run

    sc, inv = _campaign_args(tmp_path, prefix)
    root = LocalHost("root")

    def unplug(outcome):
        root.run(["ip", "netns", "exec", f"{prefix}n1", "ip", "link", "del", "lte0"], check=False)

    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="gone", hooks=RunHooks(on_sample=unplug))
    finally:
        clean_prefix(prefix, nested=False)
    recs = c.records()
    assert [r["status"] for r in recs] == ["ok", "failed", "failed"]
    assert "receiver n1 broken: interface lte0 (lte) is gone" in recs[1]["error"]
    # Everything is recorded, nothing is pending: the resume builds nothing, and the exit code says samples failed.
    try:
        assert mplab_run(["run", "--resume", str(c.path)]) == 3
    finally:
        clean_prefix(prefix, nested=False)
