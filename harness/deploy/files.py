"""Configuration files for lab machines, and pushing them with backups.

A ``ConfigFile`` is what a renderer (``lte.render``, ``wifi.render``) produces: which
machine it is for, the path there, the text, the mode, and optionally the daemon that
reads it. ``push_files`` writes files on a Host: what a push replaces is kept next to it
(``<path>.mplab-bak-<stamp>``), and a file that is already identical is left alone.

Leaves to others: what the files mean (the renderers), which Host a machine is
(``harness.deploy.machines``, or the deploying package's own role table), and restarting
the daemons that read them (``harness.deploy.services``).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.hosts.local import Host

log = logging.getLogger("mplab.deploy")

BACKUP_SUFFIX = ".mplab-bak"

#: How a renderer names the machine a file is for: a role of its own (``lte``: "enb", "epc",
#: "ue") or a machine name from the inventory (``wifi``).
M = TypeVar("M", bound=str)


@dataclass(frozen=True)
class ConfigFile(Generic[M]):
    """One configuration file for one machine."""

    machine: M
    path: str
    text: str
    mode: int = 0o644
    #: The daemon (systemd unit) that reads this file, when the deploying code restarts it per file.
    unit: str | None = None


@dataclass(frozen=True)
class Pushed:
    """One file written (or left alone because it was already identical)."""

    host: str
    path: str
    changed: bool
    backup: str | None


def backup_path(path: str, stamp: str) -> str:
    """Where the file a push replaces is kept: next to it, stamped."""
    return f"{path}{BACKUP_SUFFIX}-{stamp}"


def sha256sum_argv(paths: list[str]) -> list[str]:
    """Hash the files at ``paths`` (missing ones are reported on stderr and skipped)."""
    return ["sha256sum", "--", *paths]


def parse_sha256sum(text: str) -> dict[str, str]:
    """path -> hex digest from ``sha256sum`` output."""
    out = {}
    for line in text.splitlines():
        digest, _, path = line.partition("  ")
        if path:
            out[path] = digest
    return out


def push_files(host: Host, files: list[ConfigFile], stamp: str) -> list[Pushed]:
    """Write ``files`` on ``host``, keeping backups of what they replace; identical files are left alone.

    One ``sha256sum`` over every target tells which files exist and which differ, so
    an unchanged cell costs one command per host rather than two per file.
    """
    res = host.run(sha256sum_argv([f.path for f in files]), check=False, timeout=30)
    current = parse_sha256sum(res.stdout)
    return [push_file(host, f, stamp, current.get(f.path)) for f in files]


def push_file(host: Host, f: ConfigFile, stamp: str, current_sha256: str | None = "?") -> Pushed:
    """Write ``f`` on ``host``; keep what it replaces as a backup; skip identical files.

    Args:
        current_sha256: digest of the file on the host, None when it does not exist,
            "?" when unknown (then the host is asked).
    """
    data = f.text.encode()
    if current_sha256 == "?":
        current_sha256 = hashlib.sha256(host.read_file(f.path)).hexdigest() if host.exists(f.path) else None
    if current_sha256 == hashlib.sha256(data).hexdigest():
        return Pushed(host.name, f.path, False, None)
    existing = host.read_file(f.path) if current_sha256 is not None else None
    backup = None
    if existing is not None:
        backup = backup_path(f.path, stamp)
        host.write_file(backup, existing, mode=0o600)
    host.write_file(f.path, data, mode=f.mode)
    log.info("[%s] wrote %s%s", host.name, f.path, f" (previous kept as {backup})" if backup else "")
    return Pushed(host.name, f.path, True, backup)
