"""Daemons on a Host, controlled the way the machine does it (systemd by default).

``ServiceManager`` is the small interface deploy code (``lte/``, ``wifi/``) talks to;
``Systemd`` implements it with ``systemctl``/``journalctl`` argument lists run on a
``Host``. ``wait_active`` polls a unit to readiness with a deadline; ``restart_and_wait``
is the step both bring-ups take per daemon, failing with a ``StepError`` (the deploying
package's subclass) that names the step and the host and carries the end of the log.
Which daemons, in which order, is the deploying package's business.
"""
from __future__ import annotations

import time
from typing import Protocol

from harness.errors import CommandError, MplabError
from harness.hosts.local import Host


class ServiceError(MplabError):
    """A daemon did not start, stop or report its state."""


class StepError(MplabError):
    """A named step of a bring-up failed on a named host; subclasses say whose bring-up (``what``)."""

    what = "deploy"

    def __init__(self, step: str, host: str, detail: str, log_tail: str = "") -> None:
        self.step = step
        self.host = host
        self.detail = detail
        msg = f"{self.what} step '{step}' failed on host '{host}': {detail}"
        if log_tail.strip():
            tail = "\n".join(log_tail.strip().splitlines()[-15:])
            msg += f"\n--- last log lines ---\n{tail}"
        super().__init__(msg)


class ServiceManager(Protocol):
    """How deploy code controls daemons on one host."""

    host: Host

    def restart(self, unit: str) -> None: ...

    def stop(self, unit: str) -> None: ...

    def is_active(self, unit: str) -> bool: ...

    def logs(self, unit: str, lines: int = 200) -> str: ...

    def reload(self) -> None:
        """Re-read unit files (after deploy code wrote its own units)."""
        ...


def systemctl_argv(systemctl: str, verb: str, unit: str) -> list[str]:
    """``systemctl <verb> <unit>`` (``--no-pager`` and ``--quiet`` where they apply)."""
    if verb == "is-active":
        return [systemctl, "is-active", "--quiet", unit]
    return [systemctl, verb, unit]


def journalctl_argv(journalctl: str, unit: str, lines: int) -> list[str]:
    """The last ``lines`` journal lines of ``unit``."""
    return [journalctl, "--no-pager", "--output=short-iso", "-n", str(lines), "-u", unit]


class Systemd:
    """Daemons as systemd units on ``host``.

    ``systemctl``/``journalctl`` are the programs to run; tests point them at stand-ins
    because this CI machine has no systemd as PID 1.
    """

    def __init__(self, host: Host, systemctl: str = "systemctl", journalctl: str = "journalctl",
                 timeout_s: float = 60.0) -> None:
        self.host = host
        self.systemctl = systemctl
        self.journalctl = journalctl
        self.timeout_s = timeout_s

    def restart(self, unit: str) -> None:
        self.host.run(systemctl_argv(self.systemctl, "restart", unit), timeout=self.timeout_s)

    def stop(self, unit: str) -> None:
        self.host.run(systemctl_argv(self.systemctl, "stop", unit), timeout=self.timeout_s)

    def is_active(self, unit: str) -> bool:
        res = self.host.run(systemctl_argv(self.systemctl, "is-active", unit), check=False, timeout=15)
        return res.returncode == 0

    def reload(self) -> None:
        self.host.run([self.systemctl, "daemon-reload"], timeout=self.timeout_s)

    def logs(self, unit: str, lines: int = 200) -> str:
        res = self.host.run(journalctl_argv(self.journalctl, unit, lines), check=False, timeout=30)
        return res.stdout if res.returncode == 0 else f"(journalctl exited {res.returncode}: {res.stderr.strip()})"


def wait_active(services: ServiceManager, unit: str, deadline_s: float, settle_s: float = 0.0) -> bool:
    """Poll until ``unit`` is active (and still active ``settle_s`` later); False at the deadline.

    ``settle_s`` catches daemons that start and then exit on a bad configuration, which
    systemd reports as active for a moment.
    """
    end = time.monotonic() + deadline_s
    while True:
        if services.is_active(unit):
            if settle_s <= 0:
                return True
            time.sleep(settle_s)
            if services.is_active(unit):
                return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.1)


def restart_and_wait(services: ServiceManager, unit: str, *, step: str, host: str, error: type[StepError],
                     deadline_s: float, settle_s: float = 0.0) -> None:
    """Restart ``unit`` and wait until it is active; ``error(step, host, ...)`` with the unit's log if not.

    Args:
        host: the machine's name, for the message.
        error: the deploying package's ``StepError`` subclass.
    """
    try:
        services.restart(unit)
    except CommandError as exc:
        raise error(step, host, str(exc), services.logs(unit)) from exc
    if not wait_active(services, unit, deadline_s, settle_s):
        raise error(step, host, f"{unit} is not active {deadline_s:.0f} s after restart "
                                "(check its configuration and the log below)", services.logs(unit))
