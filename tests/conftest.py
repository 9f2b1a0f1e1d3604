"""Shared fixtures: a small emulated inventory with a unique namespace prefix, and root gating.

Namespace tests are marked ``root``; they are skipped (with the reason) when not run
as root, and CI runs as root so they run there.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from harness.config.inventory import Inventory

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
def prefix() -> str:
    """A namespace prefix no other test run uses (so parallel runs never collide)."""
    return f"mplab-t{uuid.uuid4().hex[:6]}-"
