"""Progress of a campaign from its store alone: n/N, ok / failed / flagged, sessions, rate and ETA.

One computation for every reader: the runner's per-sample log lines, ``mplab status`` (and its
``--json``) and ``mplab watch``. It reads the store's files and never writes them, and it never takes
the campaign's lock, not even for a moment (a shared probe of ``.lock`` could make a runner starting
at that instant fail as busy): the lock's holder is looked up in ``/proc/locks``.

Rate and ETA: the rate is the samples recorded in the last session over the time from that
session's start to the last append to ``samples.jsonl`` (set-up included, so the first estimate
is pessimistic, not optimistic); the ETA of a running session is when the pending samples end at
that rate, counted from the last append. A campaign that is not running has no ETA.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: sessions.jsonl events that open a session (one per `mplab run` or `--resume`).
#: In each attempt directory of a campaign run on several testbeds at once (``mplab run --testbeds K``): the
#: name of the testbed copy running it, so that a watcher pairs a running sample with that copy's meter trace.
ATTEMPT_TESTBED_FILE = "testbed.txt"

OPENING = ("start", "resume")
#: Events that close one.
CLOSING = ("finished", "interrupted", "failed")


@dataclass(frozen=True)
class Session:
    """One run or resume of a campaign, from sessions.jsonl."""

    kind: str  # start | resume
    started_at: float | None
    pid: int | None
    pending: int | None  # samples it set out to run
    #: finished | interrupted | failed | running | killed (no end line and its process is gone)
    end: str
    ended_at: float | None = None
    reason: str | None = None
    samples_run: int | None = None
    samples_failed: int | None = None
    testbeds: list[str] = field(default_factory=list)


def read_events(path: Path) -> list[dict]:
    """The lines of a sessions.jsonl (a torn or corrupt line tells nothing and is skipped)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def sessions_from_events(events: list[dict], running_pid: int | None) -> list[Session]:
    """Pair each opening event with the closing one after it; the last open one is running or killed."""
    out: list[Session] = []
    for ev in events:
        kind = ev.get("event")
        if kind in OPENING:
            out.append(Session(kind, ev.get("time"), ev.get("pid"), ev.get("pending"), "killed",
                               testbeds=list(ev.get("testbeds") or [])))
        elif kind in CLOSING and out and out[-1].ended_at is None and out[-1].end == "killed":
            last = out[-1]
            out[-1] = Session(last.kind, last.started_at, last.pid, last.pending, kind, ev.get("time"),
                              ev.get("reason"), ev.get("samples_run"), ev.get("samples_failed"), last.testbeds)
    if out and out[-1].end == "killed" and running_pid is not None:
        last = out[-1]
        out[-1] = Session(last.kind, last.started_at, last.pid, last.pending, "running", testbeds=last.testbeds)
    return out


@dataclass(frozen=True)
class Progress:
    """Where a campaign stands."""

    planned: int
    recorded: int
    ok: int
    failed: int
    #: Ok samples with at least one flagged record.
    flagged: int
    pending: int
    sessions: int
    running: bool
    #: Samples per hour in the last session; None before its first sample.
    rate_per_h: float | None
    #: Seconds until the pending samples are done at that rate (running sessions only).
    eta_s: float | None
    #: Expected end (epoch seconds), for the page's clock.
    eta_at: float | None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """``12/40 (11 ok, 1 failed, 2 flagged), 41.3 samples/h, ETA 40 min``: the runner's log prefix."""
        parts = [f"{self.recorded}/{self.planned} ({self.ok} ok, {self.failed} failed, {self.flagged} flagged)"]
        if self.rate_per_h is not None:
            parts.append(f"{self.rate_per_h:.1f} samples/h")
        if self.eta_s is not None:
            parts.append(f"ETA {format_duration(self.eta_s)}")
        return ", ".join(parts)


def format_duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.4 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def sample_statuses(records: list[dict]) -> dict[str, tuple[str, bool]]:
    """Sample id -> (its status, whether any of its records is flagged), in append order."""
    out: dict[str, tuple[str, bool]] = {}
    for r in records:
        sid = r.get("sample_id")
        _, flagged = out.get(sid, ("ok", False))
        out[sid] = (r.get("sample_status", "failed"), flagged or bool(r.get("flags")))
    return out


def compute(plan: list[str], records: list[dict], sessions: list[Session], *, last_append_at: float | None,
            now: float | None = None) -> Progress:
    """Progress of a campaign with plan ``plan`` (sample ids) from its complete records and sessions.

    Args:
        last_append_at: when ``samples.jsonl`` was last appended to (its mtime; the runner passes its own clock).
        now: the time to measure against (default: now).
    """
    now = time.time() if now is None else now
    planned_ids = set(plan)
    st = {sid: v for sid, v in sample_statuses(records).items() if sid in planned_ids}
    ok = sum(1 for s, _ in st.values() if s == "ok")
    flagged = sum(1 for s, f in st.values() if s == "ok" and f)
    pending = len(plan) - len(st)
    running = bool(sessions) and sessions[-1].end == "running"
    rate = eta = eta_at = None
    last = sessions[-1] if sessions else None
    if last is not None and last.started_at is not None and last.pending is not None:
        done_here = len(st) - (len(plan) - last.pending)
        end = last_append_at if last_append_at is not None else now
        span = end - last.started_at
        if done_here > 0 and span > 0:
            rate = done_here / span * 3600
            if running:
                eta_at = end + pending / rate * 3600
                eta = max(0.0, eta_at - now)
    return Progress(len(plan), len(st), ok, len(st) - ok, flagged, pending, len(sessions), running,
                    rate, eta, eta_at)


def lock_holder_pid(lock_path: Path) -> int | None:
    """The pid holding a ``flock`` on ``lock_path``, from ``/proc/locks`` (no lock taken); None if nobody does."""
    try:
        st = os.stat(lock_path)
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in text.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF" (a blocked waiter's line has "->" after the number)
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, ino = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(ino)) == want:
                return int(parts[4])
        except ValueError:
            continue
    return None


def campaign_progress(path: Path, plan: list[str], records: list[dict], now: float | None = None
                      ) -> tuple[Progress, list[Session]]:
    """``compute`` for a campaign directory: its sessions, the lock's holder and the records file's mtime."""
    sessions = sessions_from_events(read_events(path / "sessions.jsonl"), lock_holder_pid(path / ".lock"))
    try:
        last_append = os.stat(path / "samples.jsonl").st_mtime
    except OSError:
        last_append = None
    return compute(plan, records, sessions, last_append_at=last_append, now=now), sessions
