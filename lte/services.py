"""Daemons of the LTE cell as systemd units, and the order they depend on each other.

Start order follows the protocol dependencies: the HSS and PCRF (Diameter servers on
MongoDB) first; then the user-plane functions (SGW-U, UPF: PFCP servers); then the
control-plane functions that associate with them (SGW-C, SMF); then the MME, which
needs the HSS (S6a), SGW-C and SMF (GTP-C); last the eNodeB, which needs the MME (S1).
Stop is the reverse. Control itself (``ServiceManager``, ``Systemd``, ``restart_and_wait``)
is in ``harness.deploy.services``, shared with ``wifi/``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """One daemon: its systemd unit, which machine ("enb" or "epc") and what it is."""

    name: str
    role: str
    what: str


#: Start order (stop is the reverse). See the module docstring for why.
START_ORDER: tuple[Unit, ...] = (
    Unit("open5gs-hssd", "epc", "HSS"),
    Unit("open5gs-pcrfd", "epc", "PCRF"),
    Unit("open5gs-sgwud", "epc", "SGW-U"),
    Unit("open5gs-upfd", "epc", "UPF (PGW-U)"),
    Unit("open5gs-sgwcd", "epc", "SGW-C"),
    Unit("open5gs-smfd", "epc", "SMF (PGW-C)"),
    Unit("open5gs-mmed", "epc", "MME"),
    Unit("srsenb", "enb", "eNodeB"),
)


def start_order(enb_unit: str = "srsenb") -> list[Unit]:
    """Units in start order, with the eNodeB's unit name from the inventory."""
    return [Unit(enb_unit, u.role, u.what) if u.role == "enb" else u for u in START_ORDER]


def cell_units(inv) -> list[Unit]:
    """The cell's units in start order: Open5GS's seven then srsenb, or srsepc then srsenb."""
    lte = inv.lte
    if lte.epc.kind == "srsepc":
        return [Unit(lte.epc.unit, "epc", "srsEPC"), Unit(lte.enb.unit, "enb", "eNodeB")]
    return start_order(lte.enb.unit)
