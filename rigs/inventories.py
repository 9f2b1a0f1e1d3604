"""Emulated inventories for tests and benches: the shipped one with a short LTE tail, and small ones.

Not installed with mplab (``rigs/`` is not in the wheel); tests import these through ``tests/conftest.py``.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from harness.config.inventory import Inventory

REPO = Path(__file__).resolve().parents[1]


#: The LTE tail of the test power profile (s). The shipped profile's is 11.576 s, and the runner waits
#: every tail out between samples (the idle wait), so each LTE/both sample of a test would cost ~12 s of
#: waiting. Still several hold windows (0.5 s) and counter periods (0.1 s) long, so a missing or short
#: wait still shows in the records. Tests of the tail wait itself ask for the shipped tail (``lte_tail_s=None``)
#: or a longer one.
TEST_LTE_TAIL_S = 1.5


def short_tail_profile(profile: dict, lte_tail_s: float = TEST_LTE_TAIL_S) -> dict:
    """``profile`` (an inventory's ``power_profile`` as a dict) with a short LTE tail, named as a test profile.

    Records carry the profile's name, so nothing measured with it passes for the shipped profile.
    """
    out = {**profile, "lte": {**profile["lte"], "tail_s": lte_tail_s}}
    out["name"] = f"{profile['name']}-test-lte-tail-{lte_tail_s:g}s"
    out["source"] = (f"TEST PROFILE: {profile['name']} with its LTE tail cut from {profile['lte']['tail_s']:g} s "
                     f"to {lte_tail_s:g} s so that tests do not wait out 12 s per LTE sample (rigs/inventories.py).")
    return out


def emulated_inventory_doc(lte_tail_s: float | None = TEST_LTE_TAIL_S) -> dict:
    """inventory/emulated.yaml as a dict, its power profile a test profile with an LTE tail of ``lte_tail_s``
    (None: the shipped profile as it is)."""
    base = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    if lte_tail_s is not None:
        base["emulation"]["power_profile"] = short_tail_profile(base["emulation"]["power_profile"], lte_tail_s)
    return base


def small_inventory(prefix: str, receivers: list[tuple[float, float]], wifi_cap: float = 40,
                    lte_cap: float = 36, lte_tail_s: float | None = TEST_LTE_TAIL_S) -> Inventory:
    """An emulated inventory with one receiver per (wifi Mbit/s, lte Mbit/s) pair.

    Its power profile is the shipped one with a short LTE tail (:func:`short_tail_profile`);
    ``lte_tail_s=None`` keeps the shipped profile (its 11.6 s tail) for tests whose assertions need it.
    """
    base = emulated_inventory_doc(lte_tail_s)
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
