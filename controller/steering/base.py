"""The Steering seam: apply a decision per receiver, and count what each network carries to it.

A backend enforces an ``Assignment`` (``controller.policy``) where the controller sits and
measures from the same place: cumulative bytes per receiver and access network, as the
controller sees them (nftables element counters at the AP and eNB, OpenFlow flow statistics,
or the receiver's own interface counters for the host backend). Life cycle: ``setup()``
(everything allowed, counters from zero), ``apply()`` (in place, any number of times),
``counters()``, ``teardown()`` (idempotent; removes only what the backend created).

Counters survive ``apply``: a backend whose entries lose their counters when replaced
(nftables map elements, OpenFlow flows) reads them first and carries the sum forward.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from harness.hosts.local import Host

from controller.policy import IFACES, Assignment, Decision


@dataclass(frozen=True)
class SteeredReceiver:
    """One receiver as steering sees it: its address on each network, and its own Host."""

    name: str
    addresses: Mapping[str, str]
    host: Host | None = None
    #: Interface name per network on the receiver (host backend).
    ifnames: Mapping[str, str] = field(default_factory=dict)


class Steering(Protocol):
    """What every steering backend offers (see ``NftSteering`` for an annotated example)."""

    name: str

    def setup(self) -> None:
        """Install the backend's entries with every receiver allowed on both networks."""
        ...

    def apply(self, assignment: Assignment) -> None:
        """Enforce ``assignment`` (receivers not named keep their current state)."""
        ...

    def counters(self) -> dict[str, dict[str, int]]:
        """Cumulative bytes towards each receiver per network since ``setup``."""
        ...

    def teardown(self) -> None:
        """Remove what ``setup`` installed; idempotent."""
        ...


def all_both(receivers: list[SteeredReceiver]) -> Assignment:
    """Every receiver allowed on both networks."""
    return {r.name: Decision(frozenset(IFACES)) for r in receivers}
