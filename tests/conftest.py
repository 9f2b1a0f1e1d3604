"""Shared fixtures: a small emulated inventory with a unique namespace prefix, and root gating.

Namespace tests are marked ``root``; they are skipped (with the reason) when not run
as root, and CI runs as root so they run there.
"""
from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.config.inventory import Inventory
from rigs import leaks

REPO = Path(__file__).resolve().parent.parent
# Hugging Face libraries (datasets, huggingface_hub) never reach the Hub from a test: they read local folders.
# Set before any test module imports them (they read these variables once, at import).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


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
                     f"to {lte_tail_s:g} s so that tests do not wait out 12 s per LTE sample (tests/conftest.py).")
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


def default_sigint() -> None:
    """``preexec_fn`` of a child a test will send SIGINT: give it the default disposition.

    A suite started from a script as a background job (``make test &``) runs with SIGINT ignored, and
    children inherit that; Python then installs no KeyboardInterrupt handler and mplab keeps ignoring
    SIGINT, as it should (docs/exit-codes.md). A test of Ctrl-C must stand where a terminal's user does.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def prefix(monkeypatch) -> Iterator[str]:
    """A namespace prefix no other test run uses (so parallel runs never collide).

    The test fails (at teardown) if it leaves a namespace under the prefix or an iperf3 process
    it started running (``rigs.leaks``: its processes carry ``MPLAB_TEST_PREFIX``);
    what it left is then removed, so one leak does not spill into the next test.
    """
    p = f"mplab-t{uuid.uuid4().hex[:6]}-"
    monkeypatch.setenv(leaks.MARK, p)
    yield p
    fail_on_leftovers(p)


def allowed_ccs_apart_from_other_testbeds() -> list[str]:
    """The kernel's allowed congestion-control list without the names other live testbeds need.

    Call it while the test's own testbeds are down (before set-up, after teardown). On a shared
    machine other testbeds add and remove the names they need as they come and go (a name that is not
    the root namespace's default, cubic where the default is bbr); in CI's step of `machine` tests
    there are none, and the comparison is the whole list.
    """
    from harness import machine

    others = machine.names_needed()
    return [n for n in Path(f"/proc/sys/{machine.ALLOWED_CC.replace('.', '/')}").read_text().split()
            if n not in others]


def fail_on_leftovers(p: str) -> None:
    """Fail (after removing it) if anything is left under prefix ``p`` (for fixtures that make their own prefix:
    mark the processes with ``leaks.MARK`` too)."""
    found = leaks.leftovers(p)
    if found:
        leaks.remove(found)
        pytest.fail(found.describe() + " (clean up in a finally block or a fixture, also after a failure)",
                    pytrace=False)
