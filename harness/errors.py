"""The one error hierarchy of mplab.

Library code raises these; only the command line turns them into exit codes (each class's
``exit_code``; the table is in docs/exit-codes.md). Messages say what failed, with which
value, and what to try next.
"""
from __future__ import annotations

import errno
import shlex
from collections.abc import Sequence


#: The documented exit codes of `mplab` (docs/exit-codes.md).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SAMPLES_FAILED = 3
EXIT_STORE = 4
EXIT_BUSY = 5
EXIT_DISK_FULL = 6
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class MplabError(Exception):
    """Base of every error mplab raises on purpose."""

    exit_code = 1


class ConfigError(MplabError):
    """A bad inventory, scenario or command-line value (a usage error: exit code 2)."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
        where = ""
        if source:
            where += f"{source}: "
        if field:
            where += f"{field}: "
        super().__init__(where + message)


def missing_extra(extra: str, needs: str, module: str | None) -> ConfigError:
    """The one line for a command whose optional dependencies are not installed.

    Args:
        extra: the wheel's extra that brings them (``train``, ``cluster``).
        needs: what needs them, e.g. "`mplab train`".
        module: the module that failed to import (``ImportError.name``).
    """
    what = f" ({module} is not installed)" if module else ""
    return ConfigError(f"{needs} needs mplab's `{extra}` extra{what}: pip install 'mplab[{extra}]' "
                       f"(uv tool install 'mplab[{extra}]'; in a checkout, make setup)")


class PreflightError(MplabError):
    """Something the testbed needs is missing; nothing has been created yet."""


class NotReady(PreflightError):
    """Something did not become ready before its deadline, or the process meant to make it ready exited.

    ``what`` names the thing waited for (a daemon's socket, a port, a pty link), so the message
    says which of several waits failed.
    """

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"{what}: {reason}")


class CommandError(MplabError):
    """A command on a host failed: carries the argument list, exit code and the end of stderr."""

    def __init__(self, host: str, argv: Sequence[str], returncode: int | None, stderr: str = "",
                 note: str = "") -> None:
        self.host = host
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr_tail = stderr[-2000:]
        status = "timed out" if returncode is None else f"exited {returncode}"
        msg = f"[{host}] $ {shlex.join(self.argv)} {status}"
        if note:
            msg += f" ({note})"
        if self.stderr_tail.strip():
            msg += f": {self.stderr_tail.strip()}"
        super().__init__(msg)


class CommandTimeout(CommandError):
    """A command did not finish within its deadline (it has been killed)."""


class HostUnreachable(MplabError):
    """A host could not be reached at all (SSH connect failed, namespace missing)."""


class MeterError(MplabError):
    """A meter could not be opened, stopped answering, or sent frames that failed every check."""


class TrafficError(MplabError):
    """A transfer failed or its output could not be parsed."""


class StoreError(MplabError):
    """A campaign directory is missing, of an unknown version, corrupt, or could not be written."""

    exit_code = EXIT_STORE


class DiskFull(StoreError):
    """The disk (or quota) under a campaign, dataset or model ran out of space: finished records are kept."""

    exit_code = EXIT_DISK_FULL


#: errno values that mean "no space": the disk is full, or the user's quota is.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) says the disk or the quota is full."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in NO_SPACE):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class Busy(MplabError):
    """Something another live process holds: a campaign being run, a testbed's namespace prefix."""

    exit_code = EXIT_BUSY


class SamplesFailed(MplabError):
    """A run ended, but some samples are recorded as failed (with their reasons)."""

    exit_code = EXIT_SAMPLES_FAILED


class Interrupted(BaseException):
    """A signal stopped the work (SIGINT, SIGTERM); what was completed is kept.

    Not an ``MplabError`` (nor an ``Exception``), like ``KeyboardInterrupt``: the runner catches
    ``MplabError`` around each step of a sample to record the step as failed and go on, and a SIGTERM
    raised inside one of those steps was recorded as a failed sample ("start: stopped by SIGTERM")
    while the run went on to its end with exit 0. A stop request must reach the campaign's handler.
    """

    def __init__(self, message: str, signum: int = 2) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
