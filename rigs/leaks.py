"""What a test left behind under its namespace prefix: namespaces, processes, qdiscs, testbed records.

The tests' ``prefix`` fixture (tests/conftest.py) marks every process the test starts with
the environment variable ``MPLAB_TEST_PREFIX=<prefix>``: children inherit it, through ``ip
netns exec`` and after their parent has died, so a leftover is recognised even when it was
reparented to init. After the test the fixture calls ``leftovers``: a namespace named under the
prefix, a live process of a watched program (iperf3, the Open vSwitch daemons) carrying the mark,
or a testbed record under the prefix in /run/mplab (which keeps its congestion controls allowed
machine-wide) fails the test, and ``remove`` takes away what it found (only that: everything
under the prefix, the marked processes by pid).

Qdiscs exist only inside the testbeds' namespaces (every tc argument list runs through a
namespace Host), so a leaked qdisc is a leaked namespace; the report lists the qdiscs each
leaked namespace still holds. Cheap: one ``ip netns list`` and one pass over /proc (a few ms).
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from harness import machine
from harness.hosts.local import LocalHost
from harness.upkeep.clean import clean_prefix, list_namespaces

#: The environment variable that marks a test's processes with its prefix.
MARK = "MPLAB_TEST_PREFIX"
#: Programs whose marked, still running processes count as leaked.
WATCHED = ("iperf3", "ovs-vswitchd", "ovsdb-server")


@dataclass(frozen=True)
class Leftovers:
    """What one prefix left: namespaces (with their qdiscs) and marked processes (pid, command line)."""

    prefix: str
    namespaces: tuple[str, ...] = ()
    qdiscs: tuple[str, ...] = ()
    processes: tuple[tuple[int, str], ...] = ()
    records: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.processes or self.records)

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append(f"namespaces {', '.join(self.namespaces)}")
        if self.qdiscs:
            parts.append(f"qdiscs in them: {'; '.join(self.qdiscs)}")
        if self.processes:
            parts.append("processes " + ", ".join(f"{pid} ({cmd})" for pid, cmd in self.processes))
        if self.records:
            parts.append(f"testbed records {', '.join(self.records)}")
        return f"left behind under {self.prefix}: " + "; ".join(parts)


def marked_processes(prefix: str, programs: tuple[str, ...] = WATCHED) -> list[tuple[int, str]]:
    """Live processes of ``programs`` whose environment carries ``MARK=prefix``: (pid, command line)."""
    want = f"{MARK}={prefix}".encode()
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/comm", "rb") as f:
                if f.read().strip().decode(errors="replace") not in programs:
                    continue
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").strip().decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cmd:  # a zombie has no command line: it is dead, only not reaped yet
            out.append((int(entry.name), cmd))
    return out


def leftovers(prefix: str) -> Leftovers:
    """The namespaces under ``prefix`` (nested too) and the marked watched processes still running."""
    root = LocalHost("root")
    names = tuple(list_namespaces(root, prefix))
    qdiscs = []
    for ns in names:
        res = root.run(["tc", "-n", ns, "qdisc", "show"], check=False)
        qdiscs += [f"{ns}: {ln.strip()}" for ln in res.stdout.splitlines()
                   if ln.split()[1:2] and ln.split()[1] not in ("noqueue", "noop")]
    records = tuple(str(d) for d in sorted(machine.STATE_ROOT.glob("*")) if d.is_dir()
                    and machine.owned(d.name + "-", prefix, nested=True)) if machine.STATE_ROOT.is_dir() else ()
    return Leftovers(prefix, names, tuple(qdiscs), tuple(marked_processes(prefix)), records)


def remove(found: Leftovers) -> None:
    """Take away what ``leftovers`` found: the marked processes by pid, then everything under the prefix."""
    for pid, _ in found.processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    clean_prefix(found.prefix)
