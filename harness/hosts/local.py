"""Hosts: anything that runs commands.

A ``Host`` runs an argument list with a deadline, starts a background process and
stops it again, and reads and writes files. Everything above this module talks to
Hosts only, so the same runner drives namespaces on this machine and, through an SSH
implementation of the same interface, the lab's boards.

What this module leaves to others: which commands to run (``harness.hosts.netcmd``,
``harness.traffic``), and building hosts from an inventory (``harness.testbeds.base``).

Commands are argument lists, never shell strings. The only shells involved are two fixed scripts
below, the *gate* and the cgroup join, which receive the real command as ``"$@"``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CommandError, CommandTimeout, HostUnreachable
from harness.files import atomic_write, owned_temp_dir

log = logging.getLogger("mplab.hosts")

#: A gated process waits for one line on stdin, writes its host's wall-clock time to
#: stderr and then becomes the real command. Pre-spawning gated clients and releasing
#: them together keeps process start-up (fork, namespace entry, SSH channel set-up)
#: out of the start skew between receivers. bash's ``$EPOCHREALTIME`` (bash >= 5) reads
#: the clock without a fork: forking ``date`` after the release put nine processes'
#: fork/exec on two cores between release and start (22 ms p95 skew instead of a few).
#: ``date`` remains the fallback for an older bash.
GATE_SCRIPT = ('printf "mplab-gate-ready\\n" >&2; IFS= read -r _ || exit 97; '
               'if [ -n "${EPOCHREALTIME:-}" ]; then printf "%s\\n" "$EPOCHREALTIME" >&2; '
               'else date +%s.%N >&2; fi; exec "$@"')
GATE_NAME = "mplab-gate"
#: First line a gated process writes to stderr once it is blocked on its release.
GATE_READY = "mplab-gate-ready"

#: Exit status of a gated process whose stdin closed before it was released.
GATE_ABORTED = 97


class _Spawn:
    """The child being created inside ``spawning`` (set by the caller as soon as Popen returns)."""

    child: subprocess.Popen | None = None


#: Stop signals that came while the main thread was creating a child (``spawning``), and its depth.
_held: list[int] = []
_spawning = [0]


def hold_if_spawning(signum: int) -> bool:
    """For a stop signal's handler: True, with the signal noted, while a child is being created.

    Python's ``Popen`` does not kill a child it has forked when an exception (a handler's) interrupts it
    before it has seen the exec succeed: the child runs on, owned by nobody. Set up interrupted by Ctrl-C
    that way left a namespace behind (``ip netns add`` finished after the teardown had removed the
    prefix's namespaces). The handler returns instead, and ``spawning`` delivers the signal again once
    the caller owns the child.
    """
    if _spawning[0] and threading.current_thread() is threading.main_thread():
        _held.append(signum)
        return True
    return False


@contextlib.contextmanager
def spawning() -> Iterator[_Spawn]:
    """Create a child inside this block and set ``.child``: a stop signal that comes meanwhile waits.

    At the end of the block a held signal is delivered again (``signal.raise_signal``), after the child
    is killed (its process group with it): the handler then raises as it would have, and nothing the
    block started is left running. Outside the main thread this is a plain block (signals go to it only).
    """
    spawn = _Spawn()
    if threading.current_thread() is not threading.main_thread():
        yield spawn
        return
    _spawning[0] += 1
    try:
        yield spawn
    finally:
        # Also when the block failed (a program not found): the stop request is not lost, it wins.
        _spawning[0] -= 1
        if not _spawning[0] and _held:
            signum = _held[0]
            _held.clear()
            if spawn.child is not None:
                with contextlib.suppress(OSError):
                    if os.getpgid(spawn.child.pid) == spawn.child.pid:
                        os.killpg(spawn.child.pid, signal.SIGKILL)
                    spawn.child.kill()
                spawn.child.wait()
            signal.raise_signal(signum)


#: Joins the cgroup whose ``cgroup.procs`` is ``$1``, then becomes the real command (``"$@"``): the one other
#: fixed script, like the gate. A failed join exits 98 without running the command.
CGROUP_SCRIPT = 'printf "%s\\n" "$$" > "$1" || exit 98; shift; exec "$@"'
CGROUP_NAME = "mplab-cgroup"


def in_cgroup_argv(cgroup: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the cgroup (v2) directory ``cgroup`` from its first instruction on."""
    return ["sh", "-c", CGROUP_SCRIPT, CGROUP_NAME, str(cgroup / "cgroup.procs"), *argv]


def gated_argv(argv: Sequence[str]) -> list[str]:
    """Wrap ``argv`` so that it starts only when released (see ``GATE_SCRIPT``)."""
    return ["bash", "-c", GATE_SCRIPT, GATE_NAME, *argv]


@dataclass(frozen=True)
class CommandResult:
    """The outcome of a finished command."""

    host: str
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    def check(self) -> CommandResult:
        """Raise ``CommandError`` unless the command exited 0."""
        if self.returncode != 0:
            raise CommandError(self.host, self.argv, self.returncode, self.stderr)
        return self


@dataclass(frozen=True)
class ProcessResult:
    """The outcome of a background process, once it has exited or been stopped."""

    returncode: int | None
    stdout: str
    stderr: str
    #: Host wall-clock time at which a gated process was released (from the gate), else None.
    released_at: float | None
    #: Orchestrator wall-clock time at which the exit was observed.
    exited_at: float
    #: True when the process was stopped by us rather than exiting on its own.
    stopped: bool


class BackgroundProcess(ABC):
    """A process started by a Host; stoppable, and reaped exactly once."""

    def __init__(self, host: str, argv: Sequence[str], label: str) -> None:
        self.host = host
        self.argv = tuple(argv)
        self.label = label

    @abstractmethod
    def poll(self) -> int | None:
        """Exit code if the process has exited, else None (no side effects)."""

    @abstractmethod
    def wait_ready(self, timeout: float) -> None:
        """Wait until a gated process is blocked on its release (``CommandTimeout`` after ``timeout`` s).

        Releasing a process that is still starting would put its start-up into the start skew.
        """

    @abstractmethod
    def release(self) -> float:
        """Release a gated process; returns the orchestrator's wall-clock time of the release."""

    @abstractmethod
    def wait(self, timeout: float) -> ProcessResult:
        """Wait for the process to exit on its own; raise ``CommandTimeout`` after ``timeout`` s."""

    @abstractmethod
    def stop(self, grace_s: float = 2.0) -> ProcessResult:
        """Stop the process group: SIGINT, then SIGTERM, then SIGKILL, then reap. Idempotent."""

    def output_so_far(self) -> tuple[str, str]:
        """(stdout, stderr) written so far by a running process, for readiness by log line.

        Only processes whose output lands in local files can offer this; others raise
        ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot show output before it exits")


class Host(ABC):
    """Anything that runs commands: this machine, a network namespace, or an SSH peer."""

    #: Short kind label recorded in manifests ("local", "netns", "ssh").
    kind: str = "abstract"

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @abstractmethod
    def run(self, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
            input: str | None = None) -> CommandResult:
        """Run ``argv`` to completion.

        Args:
            argv: the command as an argument list.
            timeout: seconds before the command is killed and ``CommandTimeout`` raised.
            check: raise ``CommandError`` on a non-zero exit code.
            input: text written to the command's stdin.
        """

    @abstractmethod
    def start(self, argv: Sequence[str], *, gated: bool = False, label: str | None = None) -> BackgroundProcess:
        """Start ``argv`` in the background, in its own process group.

        With ``gated=True`` the process waits until ``release()`` is called (see ``GATE_SCRIPT``).
        """

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file as this host sees it (for a namespace, its own /sys and /proc)."""

    @abstractmethod
    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file atomically (temporary file, then rename)."""

    def read_text(self, path: str) -> str:
        """Read a text file."""
        return self.read_file(path).decode()

    def exists(self, path: str) -> bool:
        """True if ``path`` exists on this host."""
        return self.run(["test", "-e", path], check=False).returncode == 0

    def which(self, program: str) -> str | None:
        """Absolute path of ``program`` on this host's PATH, or None."""
        res = self.run(["sh", "-c", 'command -v "$1"', "mplab-which", program], check=False)
        path = res.stdout.strip()
        return path or None

    def clock_offset_s(self) -> float:
        """This host's wall clock minus the orchestrator's, in seconds (0 on this machine)."""
        return 0.0

    def close(self) -> None:  # noqa: B027 - optional hook: most hosts hold nothing to release
        """Release connections and other resources held for this host."""


# --------------------------------------------------------------------------- local


class _LocalProcess(BackgroundProcess):
    """A child process of this Python process, with output captured in temporary files."""

    def __init__(self, host: str, argv: Sequence[str], label: str, gated: bool) -> None:
        super().__init__(host, argv, label)
        self._gated = gated
        # Named with our pid: if we are killed outright, `mplab clean` finds and removes it.
        self._dir = owned_temp_dir("proc")
        self._out = open(os.path.join(self._dir.name, "stdout"), "w+b")  # noqa: SIM115 - the process's output files, closed by wait()/close()
        self._err = open(os.path.join(self._dir.name, "stderr"), "w+b")  # noqa: SIM115 - the process's output files, closed by wait()/close()
        self._result: ProcessResult | None = None
        self._stopped = False
        try:
            with spawning() as spawn:
                self._popen = spawn.child = subprocess.Popen(
                    list(argv), stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
                    stdout=self._out, stderr=self._err, start_new_session=True)
        except OSError as exc:
            self._cleanup_files()
            raise CommandError(host, argv, None, str(exc), note="could not start") from exc
        except BaseException:  # a stop signal held while it started: the child is gone (spawning)
            self._cleanup_files()
            raise
        self.pid = self._popen.pid

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait_ready(self, timeout: float) -> None:
        if not self._gated:
            raise RuntimeError(f"{self.label}: not a gated process")
        deadline = time.monotonic() + timeout
        path = os.path.join(self._dir.name, "stderr")
        while True:
            with open(path, "rb") as f:
                if f.read(len(GATE_READY)) == GATE_READY.encode():
                    return
            if self._popen.poll() is not None:
                res = self._finish(self._popen.returncode)
                raise CommandError(self.host, self.argv, res.returncode, res.stderr, note="exited before its release")
            if time.monotonic() > deadline:
                raise CommandTimeout(self.host, self.argv, None, note=f"not ready for release after {timeout:.1f} s")
            time.sleep(0.002)

    def release(self) -> float:
        if not self._gated or self._popen.stdin is None:
            raise RuntimeError(f"{self.label}: not a gated process")
        self._popen.stdin.write(b"\n")
        self._popen.stdin.flush()
        t = time.time()
        self._popen.stdin.close()
        return t

    def output_so_far(self) -> tuple[str, str]:
        if self._result is not None:
            return self._result.stdout, self._result.stderr
        with open(self._out.name, "rb") as o, open(self._err.name, "rb") as e:
            return o.read().decode(errors="replace"), e.read().decode(errors="replace")

    def _finish(self, returncode: int | None) -> ProcessResult:
        if self._result is not None:
            return self._result
        exited_at = time.time()
        self._out.seek(0)
        self._err.seek(0)
        stdout = self._out.read().decode(errors="replace")
        stderr = self._err.read().decode(errors="replace")
        self._cleanup_files()
        released_at = None
        if self._gated:
            if stderr.startswith(GATE_READY + "\n"):
                stderr = stderr[len(GATE_READY) + 1:]
            first, _, rest = stderr.partition("\n")
            try:
                released_at = float(first.replace(",", "."))  # EPOCHREALTIME follows LC_NUMERIC
                stderr = rest
            except ValueError:
                released_at = None
        self._result = ProcessResult(returncode, stdout, stderr, released_at, exited_at, self._stopped)
        return self._result

    def _cleanup_files(self) -> None:
        for f in (self._out, self._err):
            f.close()
        self._dir.cleanup()

    def wait(self, timeout: float) -> ProcessResult:
        if self._result is not None:
            return self._result
        try:
            rc = self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CommandTimeout(self.host, self.argv, None, note=f"still running after {timeout:.1f} s") from None
        return self._finish(rc)

    def stop(self, grace_s: float = 2.0) -> ProcessResult:
        if self._result is not None:
            return self._result
        if self._popen.poll() is None:
            self._stopped = True
            if self._gated and self._popen.stdin and not self._popen.stdin.closed:
                self._popen.stdin.close()  # an unreleased gate exits on EOF
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self._popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self._popen.wait(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        rc = self._popen.wait()
        return self._finish(rc)


class LocalHost(Host):
    """This machine, in the namespace the orchestrator runs in."""

    kind = "local"

    def __init__(self, name: str = "local") -> None:
        super().__init__(name)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The argument list actually executed for ``argv`` on this host."""
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
            input: str | None = None) -> CommandResult:
        full = self.wrap(argv)
        log.debug("[%s] $ %s", self.name, shlex.join(argv))
        t0 = time.monotonic()
        try:
            # subprocess.run, with the child created inside ``spawning`` (a Ctrl-C then never orphans it).
            with spawning() as spawn:
                proc = spawn.child = subprocess.Popen(
                    full, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError as exc:
            raise CommandError(self.name, argv, 127, str(exc), note="program not found") from None
        with proc:
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                raise CommandTimeout(self.name, argv, None, err or "", note=f"killed after {timeout:.1f} s") from None
            except BaseException:
                proc.kill()
                raise
        res = CommandResult(self.name, tuple(argv), proc.returncode, out, err, time.monotonic() - t0)
        if check:
            res.check()
        return res

    def start(self, argv: Sequence[str], *, gated: bool = False, label: str | None = None) -> BackgroundProcess:
        inner = gated_argv(argv) if gated else list(argv)
        log.debug("[%s] $ %s &%s", self.name, shlex.join(argv), " (gated)" if gated else "")
        return _LocalProcess(self.name, self.wrap_start(inner), label or f"{self.name}:{argv[0]}", gated)

    def wrap_start(self, argv: Sequence[str]) -> list[str]:
        """The argument list a background process runs as (``wrap``, and a namespace's cgroup, if it has one)."""
        return self.wrap(argv)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        atomic_write(Path(path), data, mode)


class NamespaceHost(LocalHost):
    """A network namespace on this machine, entered with ``ip netns exec``.

    The file system is shared with the orchestrator, except /sys and /proc, which
    ``ip netns exec`` remounts so that they show the namespace's own interfaces.
    """

    kind = "netns"

    def __init__(self, name: str, netns: str, cgroup: Path | None = None) -> None:
        super().__init__(name)
        self.netns = netns
        #: A cgroup (v2) directory the background processes started here join before they run: the
        #: emulated testbed's, whose BPF scales its sockets' TCP timers (``harness.cc.timers``).
        self.cgroup = cgroup

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def wrap_start(self, argv: Sequence[str]) -> list[str]:
        if self.cgroup is None:
            return self.wrap(argv)
        # Joined before `ip netns exec`, whose fresh /sys hides the cgroup mount; the pid stays the same
        # through both execs, so the command's first socket is already the cgroup's.
        return in_cgroup_argv(self.cgroup, self.wrap(argv))

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
            input: str | None = None) -> CommandResult:
        if not os.path.exists(f"/run/netns/{self.netns}"):
            raise HostUnreachable(f"[{self.name}] network namespace {self.netns!r} does not exist "
                                  "(was the testbed set up? try `mplab clean` and run again)")
        return super().run(argv, timeout=timeout, check=check, input=input)

    def read_file(self, path: str) -> bytes:
        if path.startswith(("/sys/", "/proc/")):
            return self.run(["cat", path]).stdout.encode()
        return super().read_file(path)

