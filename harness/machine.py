"""The machine-wide record of live testbeds, under /run/mplab.

Each live testbed (emulated, or a rig that borrows its bookkeeping) keeps a state
directory ``/run/mplab/<prefix>/`` with a ``state.json`` that says which congestion
controls it needs. Two things outside any namespace are shared by every testbed on
the machine, so they are decided here, from all the records at once:

- the names mplab added to ``net.ipv4.tcp_allowed_congestion_control`` (``allow_ccs``,
  ``release_ccs``): recorded machine-wide, under a lock, before the edit, and removed
  only when no live testbed (of any prefix) needs them any more;
- which congestion controls are still needed (``names_needed``), which the BPF
  struct_ops clean-up keeps;
- who registered (or later joined) each of mplab's BPF struct_ops congestion controls
  (``join_struct_ops``, ``release_struct_ops``): users are testbed prefixes, or ``pid:N`` for a
  process's trial registration. A clean of prefix P unregisters only a name whose users were all
  under P (or dead processes); a registration nobody recorded (another user's ``bpftool struct_ops
  register``, a program outside mplab) is never touched except by an explicit machine-wide clean.

A leaf: it knows hosts, argv builders and files, nothing of testbeds or congestion
controls. Removing namespaces and processes is ``harness.upkeep.clean``'s job.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from harness.files import atomic_write
from harness.hosts.local import Host
from harness.hosts.netcmd import sysctl_argv

STATE_ROOT = Path("/run/mplab")
ALLOWED_CC = "net.ipv4.tcp_allowed_congestion_control"
#: Names mplab added to ALLOWED_CC (machine-wide; removed once no live testbed needs them).
ALLOWED_ADDED = STATE_ROOT / "allowed-cc-added.json"
#: mplab's struct_ops registrations: name -> users (testbed prefixes, ``pid:N``), recorded before registering.
STRUCT_OPS_USERS = STATE_ROOT / "struct-ops-users.json"


def state_dir(prefix: str) -> Path:
    """The state directory of the testbed with namespace prefix ``prefix``."""
    return STATE_ROOT / prefix.rstrip("-")


def write_state(prefix: str, state: dict) -> None:
    """Record (atomically) what the testbed with ``prefix`` is and needs (``needs``: congestion controls).

    Under the machine lock: ``forget`` removes /run/mplab once no testbed is left, and must never
    do so between this testbed's directory appearing and its record being written.
    """
    with _machine_lock():
        atomic_write(state_dir(prefix) / "state.json", json.dumps(state).encode())


def owned(name: str, prefix: str, nested: bool) -> bool:
    """Whether ``name`` (a namespace or state-dir name) belongs to testbeds with ``prefix``.

    A testbed names its namespaces ``<prefix><role>`` with a dash-free role (``snd``, ``ap``,
    ``n1``, ...). ``nested=False`` takes exactly those, so one testbed never touches another
    whose prefix merely extends its own (``mplab-`` vs ``mplab-t1a2b3-``); ``nested=True``
    (what `mplab clean` does) takes every testbed under the prefix.
    """
    if not name.startswith(prefix):
        return False
    return nested or "-" not in name[len(prefix):]


def _read_state(d: Path) -> dict:
    try:
        return json.loads((d / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def names_needed() -> set[str]:
    """Congestion-control names that live emulated testbeds (any prefix) recorded as needed."""
    try:
        dirs = [d for d in STATE_ROOT.iterdir() if d.is_dir()]
    except FileNotFoundError:  # no live testbed (the last one's forget may have removed it just now)
        return set()
    return {n for d in dirs for n in _read_state(d).get("needs", [])}


def _edit_allowed_cc(root: Host, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
    """Add/remove names in the initial namespace's allowed list; returns the names actually added."""
    current = root.read_text(f"/proc/sys/{ALLOWED_CC.replace('.', '/')}").split()
    added = [n for n in add if n not in current]
    new = [n for n in current if n not in remove] + added
    if new != current:
        root.run(sysctl_argv(ALLOWED_CC, " ".join(new)))
    return added


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """The machine-wide lock over /run/mplab's shared records (the allowed list, its removal).

    The lock file lives inside /run/mplab, which ``forget`` removes when the last testbed goes: a
    waiter that wakes holding the lock of a file that has since been removed (or replaced) has
    locked nothing anyone else sees, so it lets go and locks the file that is there now.
    """
    while True:
        path = STATE_ROOT / ".allowed.lock"
        try:
            STATE_ROOT.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        except (FileNotFoundError, FileExistsError):  # /run/mplab removed while we made or opened it
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield
                return
        finally:
            os.close(fd)


def _read_added() -> set[str]:
    try:
        return set(json.loads(ALLOWED_ADDED.read_text()))
    except (OSError, json.JSONDecodeError):
        return set()


def allow_ccs(root: Host, names: Sequence[str]) -> list[str]:
    """Make ``names`` selectable in every namespace; remember machine-wide which ones mplab added.

    The record is machine-wide, not per testbed: when two testbeds need the same name, the
    one that added it may tear down first, and the name must still go when the last one does.
    Call only after the caller's state records ``names`` as needed. Returns the names added.
    """
    with _machine_lock():
        current = root.read_text(f"/proc/sys/{ALLOWED_CC.replace('.', '/')}").split()
        to_add = [n for n in names if n not in current]
        if to_add:
            # Recorded before the edit, so a crash right after it still finds the names to remove.
            atomic_write(ALLOWED_ADDED, json.dumps(sorted(_read_added() | set(to_add))).encode())
            _edit_allowed_cc(root, add=to_add)
        return to_add


def release_ccs(root: Host) -> list[str]:
    """Remove the names mplab added to the allowed list that no live testbed needs any more."""
    with _machine_lock():
        added = _read_added()
        removable = sorted(added - names_needed())
        if removable:
            _edit_allowed_cc(root, remove=removable)
            atomic_write(ALLOWED_ADDED, json.dumps(sorted(added - set(removable))).encode())
        return removable


def _read_struct_ops() -> dict[str, list[str]]:
    try:
        doc = json.loads(STRUCT_OPS_USERS.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {str(k): [str(u) for u in v] for k, v in doc.items() if isinstance(v, list)} if isinstance(doc, dict) else {}


def _write_struct_ops(users: dict[str, list[str]]) -> None:
    if not users:  # nothing recorded: no file (it would outlive every testbed)
        STRUCT_OPS_USERS.unlink(missing_ok=True)
        return
    atomic_write(STRUCT_OPS_USERS, json.dumps(users, sort_keys=True).encode())


def struct_ops_users() -> dict[str, list[str]]:
    """mplab's recorded struct_ops registrations: name -> users (prefixes, ``pid:N``)."""
    return _read_struct_ops()


def join_struct_ops(name: str, user: str, is_registered: Callable[[], bool]) -> bool:
    """Record ``user`` as a user of struct_ops ``name``; return whether the caller must register it now.

    Under the machine lock. A name mplab recorded gains ``user`` (registered again if it has
    gone). A name nobody recorded and the kernel does not have is recorded with ``user`` *before*
    the caller registers it, so a crash right after still finds it. A name the kernel has but
    nobody recorded belongs to someone else: it is used as it is, never recorded (so never removed).
    """
    with _machine_lock():
        users = _read_struct_ops()
        registered = is_registered()
        if name in users:
            if user not in users[name]:
                users[name].append(user)
                _write_struct_ops(users)
            return not registered
        if registered:
            return False
        users[name] = [user]
        _write_struct_ops(users)
        return True


def release_struct_ops(leaving: Callable[[str], bool]) -> list[str]:
    """Drop the users ``leaving(user)`` selects; return the recorded names that have no user left."""
    with _machine_lock():
        users = _read_struct_ops()
        if not users:
            return []
        kept = {n: [u for u in us if not leaving(u)] for n, us in users.items()}
        if kept != users:
            _write_struct_ops(kept)
        return sorted(n for n, us in kept.items() if not us)


def drop_struct_ops(names: Sequence[str]) -> None:
    """Forget the records of ``names`` (unregistered, or gone from the kernel)."""
    with _machine_lock():
        users = _read_struct_ops()
        if any(n in users for n in names):
            _write_struct_ops({n: us for n, us in users.items() if n not in names})


def tidy() -> None:
    """Remove /run/mplab once no live testbed, no allowed-list edit and no struct_ops record is left."""
    with _machine_lock():  # a testbed writing its first record waits, then finds /run/mplab anew
        if (not any(d.is_dir() for d in STATE_ROOT.iterdir()) and not _read_added()
                and not _read_struct_ops()):
            shutil.rmtree(STATE_ROOT, ignore_errors=True)  # no live testbed: leave nothing behind


def forget(prefix: str, root: Host, nested: bool = True, keep: Callable[[str], bool] | None = None) -> list[str]:
    """Drop the records of testbeds with ``prefix`` (see ``owned``), release what no live one needs; idempotent.

    ``keep(testbed_prefix)`` true leaves that testbed's record alone (a live testbed another
    process holds). Removes /run/mplab itself once no live testbed is left. Returns what was removed.
    """
    done: list[str] = []
    try:
        entries = sorted(STATE_ROOT.iterdir())
    except FileNotFoundError:  # never made, or the last testbed's forget (in another process) just removed it
        return done
    for d in entries:
        if d.is_dir() and owned(d.name + "-", prefix, nested) and not (keep and keep(d.name + "-")):
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"state {d}")
    released = release_ccs(root)
    if released:
        done.append(f"allowed congestion controls {released}")
    tidy()
    return done
