"""Setup II through the campaign runner: policy samples probe, decide, steer and record.

The model is a one-Gemm ONNX graph with known weights (tests/test_controller_policy.py), so the
Tuning decision is known in advance: "both" costs 10 J more, so the tuned assignment wins.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.campaign.campaign import start_campaign
from harness.campaign.control import CONTROL_FIELDS
from harness.upkeep.clean import list_namespaces
from harness.errors import ConfigError
from harness.hosts.local import LocalHost
from harness.config.scenario import Scenario

from controller.setup2 import control_factory

from tests.conftest import REPO, small_inventory
from tests.test_controller_policy import _weights, write_model

FILE = 2 * 2**20


def scenario(model: Path, **over) -> Scenario:
    doc = {"name": "setup2-test", "congestion_controls": ["cubic"], "receiver_counts": [2], "modes": [],
           "policies": ["all-lte", "ref-is", "ref-is-tuned"], "model": str(model), "samples_per_case": 1,
           "file_size": "2M", "transfer_timeout_s": 60, "retries": 1, "settle_s": 0.1,
           "control": {"probe_s": 1.0, "measure_s": 1.0, "warm_s": 0.3}}
    doc.update(over)
    return Scenario.model_validate(doc)


def test_policy_names_and_mode_free_scenarios_validate(tmp_path):
    sc = scenario(tmp_path / "m")
    assert [p.name for p in sc.policies] == ["all-lte", "ref-is", "ref-is-tuned"] and sc.n_cases == 3
    with pytest.raises(ValueError, match="at least one"):
        scenario(tmp_path / "m", policies=[])
    with pytest.raises(ValueError, match="repeated"):
        scenario(tmp_path / "m", policies=["ref-is", "ref-is"])


@pytest.mark.parametrize("over,what", [
    ({"congestion_controls": ["lia"]}, "congestion control"),
    ({"receiver_counts": [1, 2]}, "receiver count"),
    ({"file_size": "60M"}, "file size"),
])
def test_a_model_that_does_not_cover_the_scenario_is_refused_before_anything_starts(tmp_path, prefix, over, what):
    model = write_model(tmp_path / "m", _weights(both=10.0), 50.0,
                        {"ccs": ["balia", "cubic"], "receiver_counts": [2, 3], "file_bytes": [FILE]})
    inv = small_inventory(prefix, [(20, 5), (12, 11.5)])
    with pytest.raises(ConfigError, match=what) as exc:
        start_campaign(scenario(model, **over), inv, tmp_path / "runs", control_factory=control_factory)
    assert exc.value.exit_code == 2
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert list_namespaces(LocalHost(), prefix) == []


def test_the_model_is_found_from_the_scenario_folder_not_the_current_directory(tmp_path):
    model = write_model(tmp_path / "models" / "m", _weights(), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [2], "file_bytes": [FILE]})
    (tmp_path / "scenarios").mkdir()
    sc = scenario(Path("../models/m"), inventory=str(REPO / "inventory" / "emulated.yaml"))
    path = tmp_path / "scenarios" / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    res = subprocess.run([sys.executable, "-m", "mplab", "run", str(path), "--dry-run"], capture_output=True,
                         text=True, cwd=REPO, timeout=120, env={**os.environ, "MPLAB_LOG": "ERROR"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert model.is_dir()


def test_a_policy_scenario_dry_runs_on_parallel_testbeds(tmp_path, prefix):
    """No longer refused: each copy gets its own controller (tests/test_parallel.py runs one)."""
    model = write_model(tmp_path / "m", _weights(), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [2], "file_bytes": [FILE]})
    inv_path = tmp_path / "inv.yaml"  # a prefix of its own: were it run, nothing of anyone else's is touched
    inv_path.write_text(yaml.safe_dump(small_inventory(prefix, [(20, 5), (12, 7.5)]).model_dump(mode="json")))
    sc = scenario(model, inventory=str(inv_path))
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    res = subprocess.run([sys.executable, "-m", "mplab", "run", str(path), "--runs-dir", str(tmp_path / "runs"),
                          "--testbeds", "2", "--dry-run"], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "MPLAB_LOG": "ERROR"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "on 2" in res.stdout, res.stdout
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_each_testbed_copy_gets_a_controller_sharing_no_state(tmp_path):
    """One controller per copy, down to the policies: a periodic one keeps its sample's state (mp-sdn's
    primaries, its epoch loop) on itself, so two copies sharing it would overwrite each other's."""
    from harness.campaign.campaign import build_controls

    sc = scenario(tmp_path / "m", policies=["all-lte", "mp-sdn"]).model_copy(update={"model": None})
    a, b = build_controls(sc, "sc.yaml", control_factory, 2)
    assert a is not b
    assert all(a.policies[n] is not b.policies[n] for n in a.policies)
    assert a.describe() == b.describe()
    assert build_controls(sc.model_copy(update={"policies": []}), "sc.yaml", None, 2) is None


def test_mplab_run_exits_2_for_a_model_that_does_not_cover_the_scenario(tmp_path):
    model = write_model(tmp_path / "m", _weights(), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [1, 2], "file_bytes": [FILE]})
    sc = yaml.safe_load((REPO / "scenarios" / "quick-setup2.yaml").read_text())
    sc["model"] = str(model)
    sc["inventory"] = str(REPO / "inventory" / "emulated.yaml")  # the copy is not in scenarios/
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc))
    res = subprocess.run([sys.executable, "-m", "mplab", "run", str(path), "--dry-run"], capture_output=True,
                         text=True, cwd=REPO, timeout=120, env={**os.environ, "MPLAB_LOG": "ERROR"})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "does not cover the scenario" in res.stderr


@pytest.mark.root
def test_policy_samples_probe_decide_steer_and_record(tmp_path, prefix):
    model = write_model(tmp_path / "m", _weights(both=10.0), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [1, 2, 3], "file_bytes": [FILE]})
    # WiFi shares by DCF (both receivers get 1/(1/20 + 1/12) = 7.5 Mbit/s while probing together), LTE by
    # proportional fairness (each its own rate here): n1 is clearly better on WiFi (7.5 vs 5); n2's radios
    # are within 10 % (7.5 vs 7.5), so IS puts it on both and Tuning on its faster probe.
    # An LTE tail (8 s) well apart from one hold window (0.5 s): the probe waits below tell the two apart. The
    # tail is fast-forwarded (it costs no wall time), and 8 s leaves room for a loaded machine: at load 6,
    # 2-3.3 s passed between the last LTE window and the wait (a 4 s tail then left 0.7-1.9 s).
    inv = small_inventory(prefix, [(20, 5), (12, 7.5)], lte_tail_s=8.0)
    camp = start_campaign(scenario(model), inv, tmp_path / "runs", control_factory=control_factory)
    assert list_namespaces(LocalHost(), prefix) == []
    recs = {(r["sample_id"].split("-policy-")[1].rsplit("-s", 1)[0], r["receiver"]): r for r in camp.records()}
    assert len(recs) == 6
    for r in recs.values():
        assert r["status"] == "ok", r["error"]
        assert r["bytes"] == FILE
        assert set(CONTROL_FIELDS) <= set(r)
        assert r["steering"] == "nftables" and r["decision_latency_s"] >= 0
    assert {rx: recs[("all-lte", rx)]["assignment"] for rx in ("n1", "n2")} == {"n1": "lte", "n2": "lte"}
    assert recs[("all-lte", "n1")]["probe_mbit"] is None  # fixed policies do not probe
    assert {rx: recs[("ref-is", rx)]["assignment"] for rx in ("n1", "n2")} == {"n1": "wifi", "n2": "both"}
    # The probes measure what the emulated networks give while everyone is on them (DCF: 7.5 each).
    p1 = recs[("ref-is", "n1")]["probe_mbit"]
    assert p1 == {"wifi": pytest.approx(7.5, rel=0.1), "lte": pytest.approx(5.0, rel=0.1)}, p1
    tuned = {rx: recs[("ref-is-tuned", rx)] for rx in ("n1", "n2")}
    p2 = tuned["n2"]["probe_mbit"]
    faster = max(p2, key=p2.get)
    assert {rx: r["assignment"] for rx, r in tuned.items()} == {"n1": "wifi", "n2": faster}
    # Tuning acts only where this sample's own probes put n2 on both (IS's 10 % band, of the larger rate). On a
    # loaded machine the two probes can drift apart: then IS already chose one network and nothing is tuned.
    if abs(p2["wifi"] - p2["lte"]) <= 0.10 * max(p2.values()):
        assert tuned["n2"]["adopted"] == "tuned"
        tot = tuned["n1"]["predicted_energy_total_j"]
        assert tot["is"] == pytest.approx(tot["tuned"] + 10.0, abs=1e-3)
    else:
        assert tuned["n2"]["adopted"] == "is" and tuned["n1"]["predicted_energy_total_j"] is None
    # The transfer obeyed the assignment: the records' mode is the assignment, and the blocked
    # network carried (almost) nothing to the receiver.
    for (pol, rx), r in recs.items():
        assert r["mode"] == r["assignment"]
        assert not [f for f in r["flags"] if f.startswith(("path-leak", "path-idle"))], (pol, rx, r["flags"])
    both = recs[("ref-is", "n2")]
    assert both["iface_bytes"]["wifi"] > 100_000 and both["iface_bytes"]["lte"] > 100_000
    # The probes' radio tails were waited out before the release (LTE probed last: about its whole
    # tail); a policy that sent nothing waited about one hold window. Each transfer's own tail is
    # measured as for a mode sample.
    # Tuning measures the IS assignment (n2 on both) and then the tuned one. When n2's tuned radio is WiFi,
    # LTE's tail runs on through that last window (warm-up + measure, 1.3 s, and its drain), and the wait
    # holds what is left: at least half of the tail less that window.
    lte_tail_s = inv.emulation.power_profile.lte.tail_s
    ctl = scenario(model).control
    for (pol, rx), r in recs.items():
        assert r["tail_energy_j"] is not None and r["idle_wait_s"] is not None, (pol, rx)
        assert not [f for f in r["flags"] if "tail-unsettled" in f], (pol, rx, r["flags"])
        if pol == "all-lte":
            assert r["probe_idle_wait_s"] < 0.25 * lte_tail_s, (pol, rx, r["probe_idle_wait_s"])
        elif pol == "ref-is-tuned" and faster != "lte":
            rest = lte_tail_s - (ctl.warm_s + ctl.measure_s)
            assert r["probe_idle_wait_s"] > 0.5 * rest, (pol, rx, r["probe_idle_wait_s"])
        else:
            assert r["probe_idle_wait_s"] > 0.5 * lte_tail_s, (pol, rx, r["probe_idle_wait_s"])
    manifest = json.loads((camp.path / "manifest.json").read_text())
    assert manifest["control"]["steering"] == "nftables"
    assert set(manifest["control"]["policies"]) == {"all-lte", "ref-is", "ref-is-tuned"}


@pytest.mark.root
@pytest.mark.parametrize("steering", ["openflow", "host"])
def test_policy_samples_steered_by_openflow_on_a_real_ovs_or_by_the_hosts(tmp_path, prefix, steering):
    model = write_model(tmp_path / "m", _weights(both=10.0), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [1, 2, 3], "file_bytes": [FILE]})
    # Probing together, WiFi's DCF gives both 1/(1/20 + 1/5) = 4 Mbit/s: n1 4 vs 2 (WiFi), n2 4 vs 15 (LTE).
    inv = small_inventory(prefix, [(20, 2), (5, 15)])
    # The host variant probes by size (probe_bytes) rather than by time.
    sc = scenario(model, policies=["ref-is", "all-wifi"], control={
        "steering": steering, "probe_s": 1.0, "measure_s": 1.0, "warm_s": 0.3,
        "probe_bytes": 600_000 if steering == "host" else None})
    camp = start_campaign(sc, inv, tmp_path / "runs", control_factory=control_factory)
    assert list_namespaces(LocalHost(), prefix) == [], "the switch namespace and its daemons must be gone"
    recs = {(r["policy"], r["receiver"]): r for r in camp.records()}
    for r in recs.values():
        assert r["status"] == "ok", r["error"]
        assert r["steering"] == steering and r["bytes"] == FILE
        assert not [f for f in r["flags"] if f.startswith(("path-leak", "path-idle"))], r["flags"]
    assert {rx: recs[("ref-is", rx)]["assignment"] for rx in ("n1", "n2")} == {"n1": "wifi", "n2": "lte"}
    p2 = recs[("ref-is", "n2")]["probe_mbit"]
    assert p2["lte"] > 2 * p2["wifi"], p2  # from OpenFlow flow statistics, or the receivers' own counters
    assert recs[("all-wifi", "n2")]["iface_bytes"]["lte"] < 64 * 1024


@pytest.mark.root
def test_a_killed_policy_campaign_with_openflow_resumes_and_leaves_nothing_running(tmp_path, prefix):
    import signal
    import time

    from harness.campaign.store import Campaign

    model = write_model(tmp_path / "m", _weights(both=10.0), 50.0,
                        {"ccs": ["cubic"], "receiver_counts": [1, 2, 3], "file_bytes": [FILE]})
    inv = small_inventory(prefix, [(20, 5), (5, 15)])
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    sc = scenario(model, receiver_counts=[1, 2], policies=["ref-is", "all-lte"],
                  control={"steering": "openflow", "probe_s": 1.0, "measure_s": 1.0, "warm_s": 0.3})
    sc_path = tmp_path / "sc.yaml"
    sc_path.write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    runs = tmp_path / "runs"
    env = {**os.environ, "MPLAB_LOG": "ERROR"}
    proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc_path), "--inventory", str(inv_path),
                             "--runs-dir", str(runs), "--id", "k"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = runs / "k" / "samples.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if samples.exists() and samples.read_text().strip():
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"campaign ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(signal.SIGKILL)  # a crash: OVS, its database and the os-ken app are left running
    proc.wait()
    assert f"{prefix}sw" in list_namespaces(LocalHost(), prefix)
    res = subprocess.run([sys.executable, "-m", "mplab", "run", "--resume", str(runs / "k")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    c = Campaign.open(runs / "k")
    recs = c.records()
    assert {r["sample_id"] for r in recs} == set(c.manifest["plan"])
    assert all(r["status"] == "ok" and r["steering"] == "openflow" for r in recs), [r["error"] for r in recs]
    assert list_namespaces(LocalHost(), prefix) == [], "the switch namespace (and every daemon in it) must be gone"
