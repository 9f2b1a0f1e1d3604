"""Shared fixtures: a small emulated inventory with a unique namespace prefix, and root gating.

Namespace tests are marked ``root``; they are skipped (with the reason) when not run
as root, and CI runs as root so they run there.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.config.inventory import Inventory
from harness.testing import leaks

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


def small_inventory(prefix: str, receivers: list[tuple[float, float]], wifi_cap: float = 40,
                    lte_cap: float = 36) -> Inventory:
    """An emulated inventory with one receiver per (wifi Mbit/s, lte Mbit/s) pair."""
    base = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    rx = []
    for i, (w, lte) in enumerate(receivers, start=1):
        rx.append({"name": f"n{i}", "meter": {"kind": "emulated-um25c"}, "interfaces": {
            "wifi": {"name": "wlan0", "channel": {"rate_mbit": w, "buffer_ms": 10}},
            "lte": {"name": "lte0", "channel": {"rate_mbit": lte, "buffer_ms": 60}}}})
    base["receivers"] = rx
    base["name"] = f"test-{len(rx)}"
    base["emulation"]["namespace_prefix"] = prefix
    base["emulation"]["wifi_ap"]["capacity_mbit"] = wifi_cap
    base["emulation"]["lte_cell"]["capacity_mbit"] = lte_cap
    return Inventory.model_validate(base)


@pytest.fixture
def prefix(monkeypatch) -> Iterator[str]:
    """A namespace prefix no other test run uses (so parallel runs never collide).

    The test fails (at teardown) if it leaves a namespace under the prefix or an iperf3 process
    it started running (``harness.testing.leaks``: its processes carry ``MPLAB_TEST_PREFIX``);
    what it left is then removed, so one leak does not spill into the next test.
    """
    p = f"mplab-t{uuid.uuid4().hex[:6]}-"
    monkeypatch.setenv(leaks.MARK, p)
    yield p
    fail_on_leftovers(p)


def fail_on_leftovers(p: str) -> None:
    """Fail (after removing it) if anything is left under prefix ``p`` (for fixtures that make their own prefix:
    mark the processes with ``leaks.MARK`` too)."""
    found = leaks.leftovers(p)
    if found:
        leaks.remove(found)
        pytest.fail(found.describe() + " (clean up in a finally block or a fixture, also after a failure)",
                    pytrace=False)
