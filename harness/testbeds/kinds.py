"""Which Testbed class an inventory kind builds, and what a built testbed runs on.

``TESTBEDS`` is the one registry (inventory ``kind`` -> class), written out here; a new kind
of testbed is one module with a ``Testbed`` subclass and one line below. Planning, running
and recording a campaign on the testbed is ``harness.campaign``'s job.
"""
from __future__ import annotations

import logging

from harness.cc import kernel_flavour
from harness.config.inventory import Inventory
from harness.errors import MplabError, PreflightError
from harness.emulation.access import AccessKinds
from harness.testbeds.base import Testbed
from harness.testbeds.emulated import EmulatedTestbed
from harness.testbeds.lab import LabTestbed
from harness.emulation.speedup import check_speedup

log = logging.getLogger("mplab.testbeds")

#: Inventory kind -> Testbed class.
TESTBEDS: dict[str, type[Testbed]] = {"emulated": EmulatedTestbed, "lab": LabTestbed}


def build_testbed(inventory: Inventory, access_kinds: AccessKinds | None = None, speedup: float = 1.0) -> Testbed:
    """The Testbed of ``inventory``'s kind (``PreflightError`` for a kind this version cannot drive).

    ``access_kinds``: real LTE access drivers (``lte.realcell.ACCESS_KINDS``) for an emulated
    inventory's ``real_cell`` receivers; the CLI passes them (harness never imports lte).
    ``speedup``: faster than real time (``harness.emulation.speedup``; refused for a lab).
    """
    check_speedup(inventory, speedup)
    try:
        cls = TESTBEDS[inventory.kind]
    except KeyError:
        raise PreflightError(f"no testbed driver for inventory kind {inventory.kind!r} in this version "
                             f"(available: {', '.join(TESTBEDS)})") from None
    if cls is EmulatedTestbed:
        return EmulatedTestbed(inventory, access_kinds=access_kinds, speedup=speedup)
    return cls(inventory)


def testbed_flavour(testbed: Testbed) -> str:
    """The kernel flavour of the testbed's sender (mptcp.org or upstream)."""
    probe = getattr(testbed, "root", testbed.sender)
    try:
        return kernel_flavour(probe)
    except MplabError as exc:
        # An unreachable lab sender: preflight reports it with its fix; resolve for upstream meanwhile.
        log.warning("kernel flavour of %s unknown (%s); assuming upstream", probe.name, exc)
        return "upstream"
