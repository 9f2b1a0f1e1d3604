"""Nothing lost: a torn multi-receiver sample reruns; an unwritable store is refused before anything runs."""
from __future__ import annotations

import os
import subprocess

import pytest

from harness.errors import StoreError
from harness.campaign.store import SCHEMA_VERSION, Campaign


def rec(sid: str, rx: str, n: int) -> dict:
    return {"schema_version": SCHEMA_VERSION, "sample_id": sid, "receiver": rx, "n_receivers": n,
            "sample_status": "ok"}


def test_torn_last_sample_of_three_receivers_is_not_complete_and_reruns(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": ["a", "b"]})
    c.append([rec("a", f"n{i}", 3) for i in (1, 2, 3)])
    whole = c.samples_path.read_bytes()
    c.append([rec("b", f"n{i}", 3) for i in (1, 2, 3)])
    data = c.samples_path.read_bytes()
    # A crash inside the one write of sample b: its first two records landed, the third is torn.
    cut = len(data) - 20
    c.samples_path.write_bytes(data[:cut])
    assert c.completed() == {"a"}
    assert {r["sample_id"] for r in c.records()} == {"a"}  # the dataset never sees b's orphans
    done = c.repair()
    assert any("torn" in d for d in done)
    assert c.samples_path.read_bytes() == whole
    torn = list(c.path.glob("samples.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes() == data[len(whole):cut]
    assert c.repair() == []  # idempotent
    c.append([rec("b", f"n{i}", 3) for i in (1, 2, 3)])
    assert c.completed() == {"a", "b"} and len(c.records()) == 6


def _immutable(path):
    """Make ``path`` unwritable even for root (chattr +i), or skip where the filesystem cannot."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return
    res = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"chattr +i not supported here: {res.stderr.strip()}")


def _mutable(path):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_unwritable_samples_file_is_refused_before_anything_runs(tmp_path, monkeypatch):
    from harness.campaign import campaign as campaign_mod
    from tests.conftest import small_inventory

    inv = small_inventory("mplab-tnever-", [(10, 5)])
    from harness.config.load import parse_model
    from harness.config.scenario import Scenario
    sc = parse_model(Scenario, {"name": "s", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["wifi"], "samples_per_case": 1, "file_size": "1M"}, "test")
    c = Campaign.create(tmp_path, "c", {"plan": ["cubic-n1-wifi-s001"], "scenario": sc.model_dump(mode="json"),
                                        "inventory": inv.model_dump(mode="json")})
    c.samples_path.touch()
    _immutable(c.samples_path)

    def no_testbed(*a, **k):
        raise AssertionError("a testbed was built for an unwritable campaign")

    monkeypatch.setattr(campaign_mod, "build_testbed", no_testbed)
    try:
        with pytest.raises(StoreError, match="samples.jsonl") as info:
            campaign_mod.resume_campaign(c.path)
        assert info.value.exit_code == 4
    finally:
        _mutable(c.samples_path)
    assert not (c.path / "sessions.jsonl").exists() or "start" not in (c.path / "sessions.jsonl").read_text()


def test_unwritable_runs_directory_is_refused_before_anything_runs(tmp_path, monkeypatch):
    from harness.campaign import campaign as campaign_mod
    from harness.config.load import parse_model
    from harness.config.scenario import Scenario
    from tests.conftest import small_inventory

    inv = small_inventory("mplab-tnever-", [(10, 5)])
    sc = parse_model(Scenario, {"name": "s", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["wifi"], "samples_per_case": 1, "file_size": "1M"}, "test")
    runs = tmp_path / "runs"
    runs.mkdir()
    _immutable(runs)

    def no_testbed(*a, **k):
        raise AssertionError("a testbed was built for an unwritable runs directory")

    monkeypatch.setattr(campaign_mod, "build_testbed", no_testbed)
    try:
        with pytest.raises(StoreError, match="cannot write"):
            campaign_mod.start_campaign(sc, inv, runs)
    finally:
        _mutable(runs)
