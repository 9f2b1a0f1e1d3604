"""Which Testbed class an inventory kind builds, and what a built testbed runs on.

``TESTBEDS`` is the one registry (inventory ``kind`` -> class), written out here; a new kind
of testbed is one module with a ``Testbed`` subclass (declaring its capabilities, see
``harness.testbeds.base``) and one line: below, or ``register_testbed(kind, cls)`` at run time
(a plug-in, a test), which also makes ``kind`` a valid inventory kind. Planning, running and
recording a campaign on the testbed is ``harness.campaign``'s job.
"""
from __future__ import annotations

import logging

from harness.cc import kernel_flavour
from harness.config.inventory import Inventory, register_inventory_kind
from harness.errors import MplabError, PreflightError
from harness.emulation.access import AccessKinds
from harness.testbeds.base import Testbed
from harness.testbeds.emulated import EmulatedTestbed
from harness.testbeds.lab import LabTestbed
from harness.emulation.speedup import check_speedup

log = logging.getLogger("mplab.testbeds")

#: Inventory kind -> Testbed class.
TESTBEDS: dict[str, type[Testbed]] = {"emulated": EmulatedTestbed, "lab": LabTestbed}


def register_testbed(kind: str, cls: type[Testbed]) -> None:
    """Drive inventories of ``kind`` with ``cls`` (its sections as ``cls.inventory_schema`` says).

    Refuses to replace a registered kind with another class (two drivers for one kind would make
    which one runs depend on import order)."""
    if TESTBEDS.get(kind, cls) is not cls:
        raise ValueError(f"testbed kind {kind!r} is already driven by {TESTBEDS[kind].__name__}")
    register_inventory_kind(kind, cls.inventory_schema)
    TESTBEDS[kind] = cls


def build_testbed(inventory: Inventory, access_kinds: AccessKinds | None = None, speedup: float = 1.0) -> Testbed:
    """The Testbed of ``inventory``'s kind (``PreflightError`` for a kind this version cannot drive).

    ``access_kinds``: real LTE access drivers (``lte.realcell.ACCESS_KINDS``) for an emulated
    inventory's ``real_cell`` receivers; the CLI passes them (harness never imports lte).
    ``speedup``: faster than real time (``harness.emulation.speedup``; refused for a lab).
    """
    check_speedup(inventory, speedup)
    return testbed_class(inventory).build(inventory, access_kinds, speedup)


def testbed_class(inventory: Inventory) -> type[Testbed]:
    """The Testbed class of ``inventory``'s kind (``PreflightError`` for a kind this version cannot drive)."""
    try:
        return TESTBEDS[inventory.kind]
    except KeyError:
        raise PreflightError(f"no testbed driver for inventory kind {inventory.kind!r} in this version "
                             f"(available: {', '.join(TESTBEDS)})") from None


def testbed_flavour(testbed: Testbed) -> str:
    """The kernel flavour of the testbed's sender (mptcp.org or upstream)."""
    probe = testbed.probe_host
    try:
        return kernel_flavour(probe)
    except MplabError as exc:
        # An unreachable lab sender: preflight reports it with its fix (its FAIL row; a run stops there), so
        # this is no warning of its own above the table; resolve for upstream meanwhile.
        log.info("kernel flavour of %s unknown (%s); assuming upstream", probe.name, exc)
        return "upstream"
