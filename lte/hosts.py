"""Hosts of the lab's radio infrastructure (eNodeB, EPC, APs) and receivers, from the inventory.

A machine named in ``lte``/``wifi`` is reached through, in order: the lab section's
SSH target for that name (when the inventory has one: ``lab.infra`` or a receiver's
``ssh``, added by the lab-SSH work), else the section's own ``ssh`` destination
(``[user@]address[:port]``, key and known_hosts from ``~/.ssh``), else, for a machine
with no SSH at all, this machine itself.
"""
from __future__ import annotations

import re
from pathlib import Path

from harness.errors import ConfigError
from harness.hosts import Host, LocalHost
from harness.inventory import Inventory

_DEST_RE = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<addr>[^:@\s]+)(?::(?P<port>\d+))?$")


def parse_destination(dest: str) -> tuple[str, str, int]:
    """(user, address, port) of ``[user@]address[:port]``; user defaults to root, port to 22."""
    m = _DEST_RE.match(dest)
    if not m:
        raise ConfigError(f"SSH destination {dest!r} is not [user@]address[:port]")
    return m.group("user") or "root", m.group("addr"), int(m.group("port") or 22)


def host_for(inv: Inventory, name: str, ssh: str | None) -> Host:
    """A Host for the machine ``name`` (see the module docstring for the order)."""
    lab = getattr(inv, "lab", None)
    if lab is not None:  # the lab-SSH schema (harness.lab), when present
        target = next((ih.ssh for ih in getattr(lab, "infra", []) if ih.name == name and ih.ssh), None)
        if target is None:
            target = next((getattr(r, "ssh", None) for r in inv.receivers if r.name == name), None)
        if target is not None:
            from harness.lab import ssh_host
            return ssh_host(inv, name, target)
    if ssh is not None:
        from harness.ssh import SSHHost
        user, addr, port = parse_destination(ssh)
        return SSHHost(name, addr, user=user, port=port, key_file=Path("~/.ssh/id_ed25519").expanduser(),
                       known_hosts=Path("~/.ssh/known_hosts").expanduser())
    return LocalHost(name)


def receiver_hosts(inv: Inventory) -> dict[str, Host]:
    """A Host per receiver (needs the lab SSH fields; ``ConfigError`` naming a receiver without one)."""
    out = {}
    for r in inv.receivers:
        h = host_for(inv, r.name, None)
        if isinstance(h, LocalHost) and inv.kind == "lab":
            raise ConfigError(f"receiver {r.name}: no SSH target in the inventory, so mplab cannot check it",
                              field=f"receivers.{r.name}.ssh")
        out[r.name] = h
    return out
