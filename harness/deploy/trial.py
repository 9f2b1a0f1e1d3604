"""Trial starts: does a real daemon accept the configuration mplab rendered for it?

A ``Trial`` is one program on one configuration file plus the log lines that tell how far
it got. ``run_trial`` starts it in a scratch network namespace (``scratch_netns``: its
own loopback carrying the addresses the configuration binds to, so nothing touches the
machine's network), reads what it prints until the first line that decides the matter,
then stops it: a *passed* line means the program got past configuration parsing (it
went on to open its radio, driver or sockets), a *failed* line is a configuration
error and becomes the verdict's detail. A program that exits or runs out of time
without either is a failure naming its last words.

What this module leaves to others: which programs, files and markers (``lte.realcheck``,
``wifi.realcheck``), and where the files live (the caller writes them, paths redirected).
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from harness.errors import CommandError
from harness.hosts.local import Host, LocalHost, NamespaceHost
from harness.hosts.netcmd import addr_add_argv, link_up_argv, netns_add_argv, netns_del_argv

#: Where Debian keeps daemons, searched after PATH (root's PATH has them, a user's often not).
SYSTEM_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")

#: How long a program may print nothing decisive before the trial gives up.
DEFAULT_DEADLINE_S = 15.0


@dataclass(frozen=True)
class Trial:
    """One program on one configuration, and the lines that decide whether it accepted it.

    Args:
        name: what the user sees ("hostapd ap-rx", "srsenb", "open5gs-mmed").
        argv: the command; its program is resolved by the caller (PATH or a given directory).
        passed: regular expressions; a matching line shows the program is past parsing.
        failed: regular expressions; a matching line is a configuration error.
        deadline_s: give up (a failure) when neither has appeared after this long.
        warned: regular expressions; matching lines are added to a passing verdict (complaints the
            program survives, e.g. srsenb's "rrc_inactivity_timer=... is too low").
    """

    name: str
    argv: tuple[str, ...]
    passed: tuple[str, ...]
    failed: tuple[str, ...]
    deadline_s: float = DEFAULT_DEADLINE_S
    warned: tuple[str, ...] = ()
    #: Lines that can only come after parsing and show this machine, not the file, stopped the program
    #: (no SCTP in the kernel, no database): a pass, said as such.
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """How a trial ended. ``ok`` is None when the program is not installed (nothing ran)."""

    name: str
    ok: bool | None
    detail: str
    argv: tuple[str, ...] = ()
    output: str = field(default="", repr=False)

    @property
    def word(self) -> str:
        """"ok", "FAIL" or "absent"."""
        return "absent" if self.ok is None else ("ok" if self.ok else "FAIL")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _lines(text: str) -> list[str]:
    """Non-empty lines without terminal colours (srsRAN colours its errors)."""
    return [t for t in (_ANSI.sub("", ln).strip() for ln in text.splitlines()) if t]


def _first(text: str, passed: list[re.Pattern], failed: list[re.Pattern],
           blocked: list[re.Pattern] = ()) -> tuple[bool, str] | None:
    for t in _lines(text):
        if any(r.search(t) for r in blocked):
            return True, f"past its configuration, then stopped by this machine: {t}"
        if any(r.search(t) for r in failed):
            return False, t
        if any(r.search(t) for r in passed):
            return True, t
    return None


def decide(stdout: str, stderr: str, trial: Trial) -> tuple[bool, str] | None:
    """(True, line) once either stream shows the program past parsing; (False, lines) on configuration errors;
    None while undecided.

    The two streams are read apart: C stdio buffers a redirected stdout, so their interleaving in time is
    lost. A passed line wins over an error in the other stream (errors that come after parsing are about
    something else: a missing radio or SCTP); failing, the error lines are reported stderr first (where
    the parsers write), at most three.
    """
    passed = [re.compile(p) for p in trial.passed]
    failed = [re.compile(p) for p in trial.failed]
    blocked = [re.compile(p) for p in trial.blocked]
    first = [_first(stderr, passed, failed, blocked), _first(stdout, passed, failed, blocked)]
    for f in first:
        if f is not None and f[0]:
            warned = [re.compile(p) for p in trial.warned]
            warnings = [t for text in (stderr, stdout) for t in _lines(text) if any(r.search(t) for r in warned)]
            return True, f[1] + (f"; but: {' / '.join(dict.fromkeys(warnings))}" if warnings else "")
    if any(f is not None for f in first):
        lines = [t for text in (stderr, stdout) for t in _lines(text) if any(r.search(t) for r in failed)]
        return False, " / ".join(list(dict.fromkeys(lines))[:3])
    return None


def last_words(output: str, n: int = 1) -> str:
    """The last ``n`` non-empty lines of ``output`` (what a silent failure said last)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else "(no output)"


def run_trial(host: Host, trial: Trial, poll_s: float = 0.1) -> Verdict:
    """Start ``trial`` on ``host``, watch its output until a deciding line, a deadline or its exit; stop it."""
    try:
        proc = host.start(list(trial.argv), label=f"trial:{trial.name}")
    except CommandError as exc:
        return Verdict(trial.name, False, f"could not start: {exc}", trial.argv)
    end = time.monotonic() + trial.deadline_s
    try:
        while True:
            out, err = proc.output_so_far()
            both = out + ("\n" if out and not out.endswith("\n") else "") + err
            verdict = decide(out, err, trial)
            rc = proc.poll()
            if verdict is not None:
                if not verdict[0] and rc is None:
                    # A configuration error: the program is about to exit. Let it finish writing (its
                    # buffered stdout arrives only then), for at most 2 s, and read the lines again.
                    settle = time.monotonic() + 2.0
                    while proc.poll() is None and time.monotonic() < settle:
                        time.sleep(poll_s)
                    out, err = proc.output_so_far()
                    both = out + ("\n" if out and not out.endswith("\n") else "") + err
                    verdict = decide(out, err, trial) or verdict
                return Verdict(trial.name, verdict[0], verdict[1], trial.argv, both)
            if rc is not None:
                res = proc.stop()
                both = res.stdout + "\n" + res.stderr
                verdict = decide(res.stdout, res.stderr, trial)   # the last lines may have come with the exit
                if verdict is not None:
                    return Verdict(trial.name, verdict[0], verdict[1], trial.argv, both)
                return Verdict(trial.name, False, f"exited {rc} before getting past its configuration: "
                               f"{last_words(both, 2)}", trial.argv, both)
            if time.monotonic() > end:
                return Verdict(trial.name, False, f"no sign of getting past its configuration within "
                               f"{trial.deadline_s:.0f} s: {last_words(both, 2)}", trial.argv, both)
            time.sleep(poll_s)
    finally:
        proc.stop(grace_s=2.0)


def find_program(name: str, bin_dirs: Sequence[str] = ()) -> str | None:
    """``name`` from the first of ``bin_dirs`` that has it, else from PATH (and /usr/sbin, /sbin), else None."""
    for d in bin_dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    path = os.environ.get("PATH", "").split(os.pathsep) + list(SYSTEM_SBIN)
    for d in path:
        p = os.path.join(d, name)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


@contextmanager
def scratch_netns(name: str, addresses: Sequence[str] = (), root: Host | None = None) -> Iterator[NamespaceHost]:
    """A fresh network namespace ``name`` whose loopback is up and carries ``addresses`` (/32 each).

    Removed on exit, with whatever the trial left in it (a TUN device, sockets). The
    name should carry the caller's prefix so that ``mplab clean`` recognises a leftover.
    """
    root = root or LocalHost("root")
    root.run(netns_add_argv(name))
    try:
        ns = NamespaceHost(name, name)
        ns.run(link_up_argv("lo"))
        for a in dict.fromkeys(addresses):       # once each, in order
            if not a.startswith("127."):          # 127/8 is on lo already
                ns.run(addr_add_argv("lo", f"{a}/32"))
        yield ns
    finally:
        root.run(netns_del_argv(name), check=False)
