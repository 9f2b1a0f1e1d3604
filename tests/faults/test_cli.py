"""The command line: usage errors exit 2 without a traceback, --version/-h, status in words and JSON,
campaign ids that stay inside the runs directory."""
from __future__ import annotations

import json
import time

import pytest

from harness.errors import ConfigError
from harness.campaign.store import SCHEMA_VERSION, Campaign

from .conftest import REPO, mplab


@pytest.mark.parametrize("args, says", [
    (["--bogus"], "No such option"),
    (["nosuchcommand"], "No such command"),
    (["status"], "Missing argument"),
    (["run", "--inventory"], "requires an argument"),
    (["dataset", "build", "--nope"], "No such option"),
])
def test_usage_errors_exit_2_with_the_usage_and_no_traceback(args, says):
    res = mplab(*args)
    assert res.returncode == 2, res.stderr[-1500:]
    assert "Traceback" not in res.stderr and says in res.stderr
    assert "Usage: mplab" in res.stderr


def test_version_and_short_help():
    res = mplab("--version")
    assert res.returncode == 0 and res.stdout.startswith("mplab ")
    for args in (["-h"], ["run", "-h"], ["status", "-h"]):
        res = mplab(*args)
        assert res.returncode == 0 and "Usage: mplab" in res.stdout, (args, res.stderr[-500:])


@pytest.mark.parametrize("bad", ["../x", "a/b", "/tmp/x", "..", ".hidden", "x" * 101, ""])
def test_campaign_id_must_name_one_directory(bad, tmp_path):
    from harness.campaign.store import check_campaign_id

    with pytest.raises(ConfigError):
        check_campaign_id(bad)
    with pytest.raises(ConfigError):
        Campaign.create(tmp_path / "runs", bad, {"plan": []})
    assert not (tmp_path / "x").exists()


def test_cli_refuses_a_bad_id_before_anything_runs(tmp_path):
    # The inventory does not exist: whatever happens, no testbed can be built by this test.
    res = mplab("run", str(REPO / "scenarios" / "quick.yaml"), "--inventory", str(tmp_path / "none.yaml"),
                "--id", "../escaped", "--runs-dir", str(tmp_path / "runs"))
    assert res.returncode == 2 and "not a campaign id" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "runs").exists()


def _campaign(tmp_path) -> Campaign:
    c = Campaign.create(tmp_path, "c1", {"plan": ["a-s001", "b-s001"], "testbed": {"kind": "emulated"}})
    c.append([{"schema_version": SCHEMA_VERSION, "sample_id": "a-s001", "receiver": "n1", "n_receivers": 1,
               "case_id": "a", "cc": "lia", "mode": "wifi", "sample_status": "ok", "status": "ok", "flags": [],
               "throughput_mbit": 10.0, "energy_j": 5.0, "mean_power_w": 3.0, "energy_source": "emulated"}])
    c.log_session({"event": "start", "pending": 2, "pid": 4242})
    c.log_session({"event": "interrupted", "reason": "stopped by SIGTERM", "signal": "SIGTERM"})
    return c


def test_status_gives_the_last_session_in_words(tmp_path):
    c = _campaign(tmp_path)
    res = mplab("status", str(c.path))
    assert res.returncode == 0, res.stderr
    assert "1/2 samples recorded" in res.stdout
    assert "interrupted" in res.stdout and "stopped by SIGTERM" in res.stdout
    assert '{"' not in res.stdout  # no raw JSON line
    assert "resume with" in res.stdout


def test_status_json_is_for_scripts(tmp_path):
    c = _campaign(tmp_path)
    res = mplab("status", "--json", str(c.path))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["planned"] == 2 and doc["recorded"] == 1 and doc["pending"] == 1 and doc["running_pid"] is None
    assert doc["last_session"]["event"] == "interrupted" and doc["last_session"]["time"] <= time.time()
