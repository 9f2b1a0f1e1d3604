"""The machine-wide record of live testbeds (/run/mplab) under testbeds that come and go at once.

No root needed: the record's root is moved to a temporary directory, and no test here edits the
kernel's allowed congestion-control list (nothing is recorded as added, so nothing is released).
"""
from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from harness import machine
from harness.hosts.local import LocalHost


@pytest.fixture
def state_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "run-mplab"
    monkeypatch.setattr(machine, "STATE_ROOT", root)
    monkeypatch.setattr(machine, "ALLOWED_ADDED", root / "allowed-cc-added.json")
    # The struct_ops users too: the real /run/mplab's (a bench or another testbed live on this machine)
    # would otherwise keep the moved root from being removed.
    monkeypatch.setattr(machine, "STRUCT_OPS_USERS", root / "struct-ops-users.json")
    return root


def _come_and_go(prefix: str, seconds: float, lost: multiprocessing.Value) -> None:
    """A testbed writing its first record and reading it back, then going, over and over."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        machine.write_state(prefix, {"prefix": prefix, "needs": ["reno"]})
        try:
            json.loads((machine.state_dir(prefix) / "state.json").read_text())
        except (OSError, ValueError):
            with lost.get_lock():
                lost.value += 1
        machine.forget(prefix, LocalHost(), nested=False)


def test_a_testbed_s_first_record_survives_the_last_one_leaving(state_root):
    """When the last live testbed goes, /run/mplab is removed; a testbed writing its first record at that
    moment must keep it (it is what keeps its congestion controls allowed). Two processes come and go on
    their own prefixes for 3 s each; before the fix (the removal checked and done outside the lock) one of
    them lost its record within a few hundred rounds."""
    ctx = multiprocessing.get_context("fork")
    lost = ctx.Value("i", 0)
    procs = [ctx.Process(target=_come_and_go, args=(p, 3.0, lost)) for p in ("mplab-ma-", "mplab-mb-")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert lost.value == 0, f"{lost.value} testbed records vanished under a concurrent forget"
    assert not state_root.exists(), "the last testbed to go leaves nothing behind"


def test_forget_keeps_a_live_testbed_and_removes_the_root_after_the_last(state_root):
    machine.write_state("mplab-ma-", {"needs": ["reno"]})
    machine.write_state("mplab-mb-", {"needs": ["cubic"]})
    assert machine.names_needed() == {"reno", "cubic"}
    machine.forget("mplab-ma-", LocalHost(), nested=False)
    assert machine.names_needed() == {"cubic"} and state_root.exists()
    machine.forget("mplab-mb-", LocalHost(), nested=False)
    assert not state_root.exists()
