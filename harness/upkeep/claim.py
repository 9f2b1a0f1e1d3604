"""Namespace-prefix claims: one live emulated testbed per prefix, and whoever holds it, named.

A testbed that builds namespaces ``<prefix>*`` first claims the prefix: an ``flock`` on
``/run/mplab-claims/<prefix>lock`` held for as long as the testbed lives, with the holder
(campaign or label, pid, since when) written into the file. A second testbed on the same
prefix is refused with that holder's name instead of tearing the live one down, and
`mplab clean` leaves a claimed prefix alone. The kernel drops the lock when the holder
dies, so a crash never leaves a prefix claimed; the stale file is removed by the next
claim or by `mplab clean`.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import Busy
from harness.files import held_lock_text, try_flock, write_lock_text

#: Outside /run/mplab on purpose: `mplab clean` removes that directory when no testbed is live.
CLAIMS_ROOT = Path("/run/mplab-claims")


@dataclass(frozen=True)
class Holder:
    """Who holds a prefix."""

    owner: str
    pid: int
    since: float

    def describe(self) -> str:
        return f"{self.owner} (pid {self.pid}, since {time.strftime('%H:%M:%S', time.localtime(self.since))})"


def claim_path(prefix: str, root: Path | None = None) -> Path:
    return (root or CLAIMS_ROOT) / f"{prefix}lock"


def _parse_holder(text: str) -> Holder | None:
    try:
        doc = json.loads(text)
        return Holder(str(doc["owner"]), int(doc["pid"]), float(doc["since"]))
    except (ValueError, KeyError, TypeError):
        return None


def _read_holder(path: Path) -> Holder | None:
    try:
        return _parse_holder(path.read_text())
    except OSError:
        return None


def holder(prefix: str, root: Path | None = None) -> Holder | None:
    """The live holder of ``prefix``, or None when nobody holds it (a crashed holder holds nothing)."""
    text = held_lock_text(claim_path(prefix, root))
    if text is None:
        return None
    return _parse_holder(text) or Holder("an unnamed mplab process", -1, 0.0)


def held_by_other(prefix: str, root: Path | None = None) -> Holder | None:
    """The holder of ``prefix`` if it is another process than this one."""
    h = holder(prefix, root)
    return h if h is not None and h.pid != os.getpid() else None


class PrefixClaim:
    """An exclusive claim on a namespace prefix; ``acquire`` refuses (``Busy``) one another process holds."""

    def __init__(self, prefix: str, owner: str, root: Path | None = None) -> None:
        self.prefix = prefix
        self.owner = owner
        self.path = claim_path(prefix, root)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the claim (idempotent for this object); ``Busy`` naming the holder if another process has it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = try_flock(self.path)
            if fd is None:
                h = _read_holder(self.path)
                who = h.describe() if h else "another mplab process"
                raise Busy(f"namespace prefix {self.prefix!r} is held by {who}: its testbed is live. Wait for it to "
                           "end, or give this inventory another emulation.namespace_prefix "
                           "(e.g. mplab-mine-)")
            # NB: a releasing holder unlinks the file while locked; if we locked that unlinked inode,
            # someone else may already hold a fresh file at the path: try again on the path's file.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        doc = json.dumps({"owner": self.owner, "pid": os.getpid(), "since": time.time(), "prefix": self.prefix})
        write_lock_text(fd, doc + "\n")
        self._fd = fd

    def release(self) -> None:
        """Give the claim up (idempotent): remove the file while still holding it, then unlock."""
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None


def _claimed_prefixes(prefix: str, nested: bool, root: Path | None) -> list[str]:
    """Prefixes under ``prefix`` that have a claim file (``nested=False``: ``prefix`` itself only)."""
    base = root or CLAIMS_ROOT
    if not base.exists():
        return []
    out = []
    for path in sorted(base.iterdir()):
        name = path.name.removesuffix("lock")
        if path.name.endswith("lock") and name.startswith(prefix) and (nested or name == prefix):
            out.append(name)
    return out


def held_under(prefix: str, nested: bool = True, root: Path | None = None) -> list[tuple[str, Holder]]:
    """(prefix, holder) of every claim under ``prefix`` another live process holds."""
    out = []
    for p in _claimed_prefixes(prefix, nested, root):
        h = held_by_other(p, root)
        if h is not None:
            out.append((p, h))
    return out


def remove_stale(prefix: str, root: Path | None = None, nested: bool = True) -> list[str]:
    """Remove claim files under ``prefix`` that no live process holds (what a crash leaves); idempotent."""
    base = root or CLAIMS_ROOT
    done = []
    for name in _claimed_prefixes(prefix, nested, root):
        path = claim_path(name, base)
        stale = PrefixClaim(name, "mplab clean", base)
        try:
            stale.acquire()
        except Busy:
            continue
        stale.release()
        done.append(f"stale claim {path}")
    return done
