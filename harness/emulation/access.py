"""A receiver's LTE access on the emulated testbed: how its ``lte0`` gets to the eNB namespace.

The default is the *emulated channel*: a veth pair from the eNB namespace (the testbed's
``downlink_device``, ``rx<i>``) to the receiver (``lte0``), shaped by HTB and the radio loop. An
inventory may instead ask for a real cell for one receiver (``interfaces.lte.real_cell``); that
implementation lives in ``lte/``
(``lte.realcell``), which harness never imports: the CLI passes a registry of access kinds
(``kind -> factory``) into the testbed. Without an entry for a kind, preflight says so.

Life cycle, as everywhere: ``check`` (no side effects), ``up`` (block until ``lte0`` has the
receiver's address, with a deadline), ``down`` (idempotent; only what ``up`` started).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.config.inventory import Inventory, RealCell
from harness.errors import PreflightError
from harness.hosts.local import Host, LocalHost
from harness.hosts.netcmd import addr_add_argv, link_up_argv, veth_argv
from harness.upkeep.preflight import Check

#: What an emulated-channel receiver's LTE path is recorded as.
EMULATED_CHANNEL = "emulated-channel"


@dataclass(frozen=True)
class LteLink:
    """Where one receiver's LTE path goes: the eNB side and the receiver side of it."""

    receiver: str
    #: the receiver's index (1-based): its addresses are 10.20.<index>.x
    index: int
    enb: Host
    enb_netns: str
    #: the receiver's namespace, and a Host running commands in it
    receiver_netns: str
    receiver_host: Host
    #: the receiver's LTE interface name (``lte0``) and address, and the eNB side's address (its gateway)
    ifname: str
    address: str
    gateway: str
    #: a per-testbed scratch directory (files, logs) that teardown removes
    state_dir: Path
    #: the eNB-side device towards the receiver (``Testbed.downlink_device``: ``rx<index>`` on the emulated testbed)
    enb_device: str = ""


class LteAccess(Protocol):
    """One receiver's LTE access. ``shaped``: the testbed's HTB, radio loop and delay line act on it."""

    kind: str
    shaped: bool

    def check(self, root: Host) -> list[Check]:
        """What is missing to bring it up (no side effects)."""
        ...

    def up(self, link: LteLink) -> None:
        """Create the path; return once ``link.ifname`` has ``link.address`` in the receiver namespace."""
        ...

    def down(self) -> None:
        """Stop what ``up`` started (idempotent; namespaces are the testbed's to delete)."""
        ...

    def describe(self) -> dict:
        """What records and the manifest say this path was."""
        ...

    def health(self) -> str | None:
        """Between samples: None while the path still works, else why not (the sample is then flagged)."""
        ...


#: A factory of one access kind: (the receiver's ``real_cell`` option, the inventory) -> an LteAccess.
AccessFactory = Callable[[RealCell, Inventory], LteAccess]
AccessKinds = Mapping[str, AccessFactory]


class EmulatedChannel:
    """The default: a veth pair, shaped by the testbed (HTB + byte FIFO, radio loop, delay line)."""

    kind = EMULATED_CHANNEL
    shaped = True

    def __init__(self, root: Host | None = None) -> None:
        self.root = root or LocalHost("root")

    def check(self, root: Host) -> list[Check]:
        return []

    def up(self, link: LteLink) -> None:
        dev = link.enb_device
        self.root.run(veth_argv(dev, link.enb_netns, link.ifname, link.receiver_netns))
        link.enb.run(addr_add_argv(dev, f"{link.gateway}/24"))
        link.enb.run(link_up_argv(dev))

    def down(self) -> None:
        """Nothing of its own: the veths go with the namespaces."""

    def describe(self) -> dict:
        return {"kind": self.kind}

    def health(self) -> str | None:
        return None                      # the testbed's own link repair covers the veth


class MissingAccess:
    """A ``real_cell`` kind nobody registered (the CLI wires ``lte.realcell``): preflight fails, saying so."""

    shaped = False

    def __init__(self, spec: RealCell, known: list[str]) -> None:
        self.kind = spec.kind
        self.known = known

    def check(self, root: Host) -> list[Check]:
        return [Check(root.name, f"LTE access {self.kind}", False,
                      f"no driver for real_cell kind {self.kind!r} in this process (registered: "
                      f"{', '.join(self.known) or 'none'})",
                      "run through the mplab CLI (it registers lte.realcell), or pass access_kinds=lte.realcell."
                      "ACCESS_KINDS to the testbed")]

    def up(self, link: LteLink) -> None:
        raise PreflightError(self.check(LocalHost("root"))[0].detail)

    def down(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": self.kind}

    def health(self) -> str | None:
        return None


def lte_access_for(spec: RealCell | None, inventory: Inventory, kinds: AccessKinds | None,
                   root: Host | None = None) -> LteAccess:
    """The access of one receiver: the emulated channel without ``real_cell``, else its kind's factory."""
    if spec is None:
        return EmulatedChannel(root)
    factory = (kinds or {}).get(spec.kind)
    if factory is None:
        return MissingAccess(spec, sorted(kinds or {}))
    return factory(spec, inventory)
