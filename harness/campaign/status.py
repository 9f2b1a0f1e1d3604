"""What `mplab status` reports about a campaign, as data (its ``--json`` form), and its sessions in words.

Reads the store only (``samples.jsonl``, ``sessions.jsonl``, the lock's holder from /proc/locks):
safe beside a running campaign. The command prints it; ``mplab watch`` computes the same progress.
"""
from __future__ import annotations

import time
from dataclasses import asdict

from harness.campaign.progress import campaign_progress, lock_holder_pid, read_events, sample_statuses
from harness.campaign.store import Campaign


def describe_session(event: dict, now: float | None = None) -> str:
    """A sessions.jsonl line in words: what happened, when, and why it ended."""
    when = event.get("time")
    stamp = "at an unknown time"
    if isinstance(when, (int, float)):
        ago = max(0.0, (now or time.time()) - when)
        age = f"{ago:.0f} s" if ago < 120 else (f"{ago / 60:.0f} min" if ago < 7200 else f"{ago / 3600:.1f} h")
        stamp = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))} ({age} ago)"
    kind = event.get("event")
    pid = f" by pid {event['pid']}" if event.get("pid") else ""
    if kind in ("start", "resume"):
        verb = "started" if kind == "start" else "resumed"
        at = f" at speed-up {event['speedup']:g}" if isinstance(event.get("speedup"), (int, float)) else ""
        return f"{verb} {stamp}{pid} with {event.get('pending', '?')} sample(s) to run{at}"
    if kind == "finished":
        if "samples_run" in event:
            failed = event.get("samples_failed", 0)
            return (f"finished {stamp}: ran {event['samples_run']} sample(s)"
                    + (f", {failed} failed" if failed else ", all ok"))
        return f"finished {stamp}"
    if kind == "interrupted":
        return f"interrupted {stamp}: {event.get('reason') or 'reason not recorded'}"
    if kind == "failed":
        return f"failed {stamp}: {event.get('reason') or 'reason not recorded'}"
    return f"{kind or 'unknown event'} {stamp}"


def campaign_status(c: Campaign) -> dict:
    """What `mplab status` reports, as data (its --json form)."""
    records = c.records()
    planned = c.plan
    prog, sessions = campaign_progress(c.path, planned, records)
    events = read_events(c.path / "sessions.jsonl")
    running = sessions[-1].pid if prog.running and sessions else None
    return {
        "campaign": c.id,
        "path": str(c.path),
        "testbed": (c.manifest.get("testbed") or {}).get("kind"),
        "planned": prog.planned,
        "recorded": prog.recorded,
        "ok": prog.ok,
        "failed": prog.failed,
        "flagged": prog.flagged,
        "failed_samples": sorted(sid for sid, (s, _) in sample_statuses(records).items() if s != "ok"),
        "pending": prog.pending,
        "rate_samples_per_h": prog.rate_per_h,
        "eta_s": prog.eta_s,
        "eta_at": prog.eta_at,
        # The lock's holder from /proc/locks (never a probe of the lock itself); the session's pid if unknown.
        "running_pid": lock_holder_pid(c.path / ".lock") or running,
        "last_session": events[-1] if events else None,
        # Runs and resumes (a session is a start/resume line and the end line after it).
        "sessions": len(sessions),
        **damaged_status(c),
        "session_list": [asdict(s) for s in sessions],
    }


def damaged_status(c: Campaign) -> dict:
    """The damaged lines of samples.jsonl (never counted as recorded; their samples run again on resume)."""
    tail = c.torn_tail()
    return {"damaged": [{"line": d.line, "sample_id": d.sample_id, "reason": d.reason} for d in c.damaged()],
            "torn_tail": None if tail is None else {**asdict(tail), "reason": tail.describe(c.samples_path)}}
