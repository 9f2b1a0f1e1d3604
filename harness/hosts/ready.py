"""Readiness with a deadline: poll a condition until it holds, never a bare ``sleep``.

``wait_until`` is the one polling loop of the harness (every wait has a deadline): daemons' sockets and
pid files, listening ports, pty links, OVS ports. It raises ``NotReady`` naming what it waited
for, either at the deadline or as soon as the process meant to make it ready has exited (with
the end of that process's stderr). What to wait for, and what to clean up after a failure, are
the callers' business.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from harness.errors import NotReady
from harness.hosts.local import BackgroundProcess, Host

#: How much of an exited process's stderr goes into the error.
STDERR_TAIL = 500


class Polled(Protocol):
    """A process whose exit ends a wait early: a ``BackgroundProcess`` or a ``subprocess.Popen``."""

    def poll(self) -> int | None: ...


def wait_until(predicate: Callable[[], object], deadline_s: float, what: str, *, proc: Polled | None = None,
               poll_s: float = 0.02, detail: Callable[[], str] | None = None,
               error: type[NotReady] = NotReady) -> None:
    """Poll ``predicate`` every ``poll_s`` s until it is true.

    Args:
        predicate: the readiness check; called at least once, even with ``deadline_s <= 0``.
        deadline_s: give up after this long (s).
        what: what is waited for, as the error should name it ("sshd in mplab-x-n1 (10.0.0.2:22)").
        proc: the process that makes ``what`` ready; its exit ends the wait at once. A
            ``BackgroundProcess`` is reaped (``stop()``) and the end of its stderr goes into the error.
        detail: called at the failure for more words (what was seen instead, a log's tail).
        error: the ``NotReady`` subclass to raise.

    Raises:
        NotReady (or ``error``): at the deadline, or when ``proc`` has exited.
    """
    end = time.monotonic() + deadline_s
    while not predicate():
        if proc is not None and (rc := proc.poll()) is not None:
            reason = f"exited ({rc}) before it was ready"
            if isinstance(proc, BackgroundProcess):
                reason = f"{proc.label} {reason}"
                tail = proc.stop().stderr.strip()[-STDERR_TAIL:]
                if tail:
                    reason += f": {tail}"
            if detail is not None:
                reason += f"; {detail()}"
            raise error(what, reason)
        if time.monotonic() > end:
            reason = f"not ready within {deadline_s:g} s"
            if detail is not None:
                reason += f"; {detail()}"
            raise error(what, reason)
        time.sleep(poll_s)


def time_left(end: float) -> float:
    """Seconds until the ``time.monotonic()`` instant ``end`` (never negative): one deadline over several waits."""
    return max(0.0, end - time.monotonic())


def listening_ports(host: Host, timeout: float = 30.0) -> set[int]:
    """The TCP ports something listens on in ``host`` (one ``ss -Hltn``; an MPTCP listener has a TCP one too)."""
    res = host.run(["ss", "-Hltn"], check=False, timeout=timeout)
    out = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3].rsplit(":", 1)[-1].isdigit():
            out.add(int(parts[3].rsplit(":", 1)[-1]))
    return out
