"""Clean-up of what testbeds with a namespace prefix left behind (`mplab clean`, set-up, teardown).

``clean_prefix`` runs an explicit tuple of cleaners, in order, each ``fn(prefix, root, nested)
-> list of what it removed``: processes and namespaces, the machine-wide record
(``harness.machine.forget``: state directories, names added to the allowed list), the BPF
struct_ops the prefix's testbeds registered (recorded machine-wide) that no live testbed needs, the key
directories of crashed SSH rigs, scratch directories
(background processes' output, Ray shards) whose creator was killed outright, the cgroups of sped-up
testbeds (their TCP timer program goes with them), and claim files no live process holds. Every
cleaner is idempotent and touches only names under the prefix (or recorded by mplab, or owned by a dead
process): it is safe to run twice, after a crash, or with nothing to do.

A testbed whose namespace prefix another live process has claimed (``harness.upkeep.claim``)
is left alone: its namespaces, processes and record stay, and the last entry says so
(``skipped <prefix>*: live testbed of campaign ... (pid ...)``). What a crash leaves is never
claimed (the kernel drops the lock with the process), so it is always removed.

``MACHINE_WIDE`` (`mplab clean --machine-wide`) adds one more cleaner: every ``mplab_*``
struct_ops no live testbed needs, recorded or not (e.g. one registered by hand, or before
registrations were recorded). Never part of a prefix's clean: another user's experiment may
be using it.

A new kind of leftover gets a cleaner here and a line in ``CLEANERS``; nothing registers
itself by being imported.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import machine
from harness.cc import bpfcc, timers
from harness.files import orphaned_temp_dirs
from harness.hosts.local import Host, LocalHost
from harness.upkeep import claim as claims

#: Where an SSH rig (``rigs.sshrig``) keeps its keys: ``<tmp>/<prefix>ssh-XXXXXXXX``.
SSH_RIG_DIR = "{prefix}ssh-"


def list_namespaces(root: Host, prefix: str, nested: bool = True) -> list[str]:
    """Namespaces of testbeds with ``prefix`` (see ``harness.machine.owned``)."""
    res = root.run(["ip", "-j", "netns", "list"], check=False)
    try:
        names = [e["name"] for e in json.loads(res.stdout or "[]")]
    except (json.JSONDecodeError, KeyError, TypeError):
        names = [line.split()[0] for line in res.stdout.splitlines() if line.strip()]
    return [n for n in names if machine.owned(n, prefix, nested)]


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie does not: it has exited and only waits for its parent to reap it,
    and a process orphaned by the kill (e.g. an sshd session child whose listener we stopped) is reaped by
    pid 1 whenever that gets round to it (a second or more on some inits), so ``/proc/PID`` alone overstates it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def _kill_namespace_processes(root: Host, ns: str) -> None:
    # Every process inside one of our namespaces was started by mplab: stop them by pid.
    pids = [int(p) for p in root.run(["ip", "netns", "pids", ns], check=False).stdout.split()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2.0
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _running(p)]
            time.sleep(0.02)
        pids = alive
        if not pids:
            break


def testbed_prefix(ns: str) -> str:
    """The prefix of the testbed a namespace belongs to (``mplab-t1-n1`` -> ``mplab-t1-``: roles have no dash)."""
    return ns[:ns.rindex("-") + 1]


def live_elsewhere(tb_prefix: str) -> bool:
    """Whether another live process holds the testbed prefix ``tb_prefix`` (its testbed must not be touched)."""
    return claims.held_by_other(tb_prefix) is not None


def remove_namespaces(prefix: str, root: Host, nested: bool) -> list[str]:
    """Stop the processes inside each namespace under ``prefix`` (by pid), then delete the namespace."""
    done = []
    for ns in list_namespaces(root, prefix, nested):
        if live_elsewhere(testbed_prefix(ns)):
            continue
        _kill_namespace_processes(root, ns)
        root.run(["ip", "netns", "del", ns], check=False)
        done.append(f"namespace {ns}")
    return done


def forget_records(prefix: str, root: Host, nested: bool) -> list[str]:
    """The machine-wide record: state directories under ``prefix``, allowed-list names no live testbed needs."""
    return machine.forget(prefix, root, nested, keep=live_elsewhere)


def _dead_process(user: str) -> bool:
    """Whether a struct_ops user ``pid:N`` (a trial registration) names a process that is gone."""
    return user.startswith("pid:") and user[4:].isdigit() and not _running(int(user[4:]))


def unregister_bpf_ccs(prefix: str, root: Host, nested: bool) -> list[str]:
    """Unregister the BPF struct_ops congestion controls that testbeds under ``prefix`` registered.

    Struct_ops are global to the machine: only names whose recorded users (``harness.machine``)
    were all under ``prefix`` (or dead processes' trials) go, and a name a live testbed of any
    prefix needs stays. A registration nobody recorded is another user's: left alone.
    """
    def leaving(user: str) -> bool:
        if user.startswith("mplab-"):
            return machine.owned(user, prefix, nested) and not live_elsewhere(user)
        return _dead_process(user)

    done = bpfcc.unregister_released(root, leaving, keep=machine.names_needed())
    machine.tidy()
    return done


def unregister_unrecorded_bpf_ccs(prefix: str, root: Host, nested: bool) -> list[str]:
    """Machine-wide only: every ``mplab_*`` struct_ops no live testbed needs, whoever registered it."""
    done = bpfcc.unregister_all(root, keep=machine.names_needed())
    machine.drop_struct_ops([d.removeprefix("struct_ops ") for d in done])
    machine.tidy()
    return done


def remove_ssh_rig_dirs(prefix: str, root: Host, nested: bool) -> list[str]:  # cleaner signature
    """Key directories a crashed SSH rig left in the temp dir (its sshds died with their namespaces)."""
    done = []
    pattern = SSH_RIG_DIR.format(prefix=prefix + ("*" if nested else "")) + "*"
    for d in Path(tempfile.gettempdir()).glob(pattern):
        if d.is_dir() and (d / "authorized_keys").exists():
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"ssh rig keys {d}")
    return done


def remove_orphaned_temp_dirs(prefix: str, root: Host, nested: bool) -> list[str]:  # cleaner signature
    """Scratch directories (background processes' output, Ray shards) whose creator was killed outright.

    Not per prefix: they are named with their creator's pid, and only a dead creator's are removed.
    """
    done = []
    for d in orphaned_temp_dirs():
        shutil.rmtree(d, ignore_errors=True)
        done.append(f"scratch directory {d}")
    return done


def remove_timer_cgroups(prefix: str, root: Host, nested: bool) -> list[str]:  # cleaner signature
    """The cgroups of sped-up testbeds under ``prefix`` (``harness.cc.timers``), with the timer program attached.

    Their processes are the testbeds' (stopped with the namespaces before this runs; any left are stopped by pid);
    removing a cgroup releases the program. A live testbed's cgroup stays.
    """
    return timers.remove_cgroups(prefix, nested, keep=live_elsewhere)


def remove_stale_claims(prefix: str, root: Host, nested: bool) -> list[str]:  # cleaner signature
    """Claim files under ``prefix`` that no live process holds (a crashed testbed's)."""
    return claims.remove_stale(prefix, nested=nested)


def report_live_testbeds(prefix: str, root: Host, nested: bool) -> list[str]:  # cleaner signature
    """Not a cleaner: one line per testbed under ``prefix`` that was left alone because another process holds it."""
    return [f"skipped {p}*: live testbed of {h.describe()}" for p, h in claims.held_under(prefix, nested=nested)]


Cleaner = Callable[[str, Host, bool], list[str]]

#: In order: namespaces first (their processes hold nothing else), then the records, so that
#: ``names_needed`` sees only the other live testbeds when struct_ops are unregistered; claim
#: files last (a testbed being torn down still holds its own), then what was left alone.
CLEANERS: tuple[Cleaner, ...] = (remove_namespaces, forget_records, unregister_bpf_ccs, remove_ssh_rig_dirs,
                                 remove_orphaned_temp_dirs, remove_timer_cgroups, remove_stale_claims,
                                 report_live_testbeds)


#: `mplab clean --machine-wide`: also what nobody recorded (after the prefix's own clean-up).
MACHINE_WIDE: tuple[Cleaner, ...] = (*CLEANERS[:3], unregister_unrecorded_bpf_ccs, *CLEANERS[3:])


def clean_prefix(prefix: str = "mplab-", root: Host | None = None, nested: bool = True,
                 cleaners: tuple[Cleaner, ...] = CLEANERS) -> list[str]:
    """Remove everything testbeds with ``prefix`` left behind; idempotent.

    With ``nested=False`` only the testbed whose prefix is exactly ``prefix`` (see
    ``harness.machine.owned``). Returns a description of what was removed.
    """
    root = root or LocalHost("root")
    done: list[str] = []
    for cleaner in cleaners:
        done += cleaner(prefix, root, nested)
    return done
