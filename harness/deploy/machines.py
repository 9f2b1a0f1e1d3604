"""Hosts of the lab's machines, by inventory name: sender, receivers, radio infrastructure.

A machine named in ``lte``/``wifi`` is a ``lab.infra`` entry; the sender and each receiver
have their own ``ssh``. All become ``harness.hosts.ssh.SSHHost``s through ``ssh_host`` (the
lab's SSH defaults filled in). For deploy code, a machine with no SSH target (an inventory
without a ``lab`` section, or an infra entry without ``ssh``) is this machine.
"""
from __future__ import annotations

from harness.config.inventory import Inventory, Lab
from harness.errors import ConfigError
from harness.hosts.local import Host, LocalHost
from harness.hosts.ssh import SSHHost


def ssh_host(inventory: Inventory, name: str, target) -> SSHHost:
    """An ``SSHHost`` for one lab machine, with the lab's defaults filled in."""
    kw = (inventory.lab or Lab()).ssh_settings(target)
    return SSHHost(name, kw.pop("address"), **kw)


def host_for(inv: Inventory, name: str) -> Host:
    """A Host for the machine ``name``: its SSH target from the inventory, else this machine."""
    if inv.lab is not None:
        target = next((ih.ssh for ih in inv.lab.infra if ih.name == name), None)
        if target is None:
            target = next((r.ssh for r in inv.receivers if r.name == name), None)
        if target is not None:
            return ssh_host(inv, name, target)
    return LocalHost(name)


def receiver_hosts(inv: Inventory) -> dict[str, Host]:
    """A Host per receiver (``ConfigError`` naming a lab receiver without an SSH target)."""
    out = {}
    for r in inv.receivers:
        if inv.emulation is None and r.ssh is None:  # real machines (no emulated section) are reached over SSH
            raise ConfigError(f"receiver {r.name}: no ssh section, so mplab cannot reach it",
                              field=f"receivers.{r.name}.ssh")
        out[r.name] = host_for(inv, r.name)
    return out
