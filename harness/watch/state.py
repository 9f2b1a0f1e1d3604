"""What `mplab watch` shows, read from a campaign directory while a runner may be writing it.

``CampaignView`` reads the store incrementally and read-only: the new complete lines of
``samples.jsonl`` (from the offset it reached), ``sessions.jsonl``, the lock's holder from
``/proc/locks`` (never the lock itself), the running sample's ``raw/.partial-<id>/attempt-N/``
and the session's continuous meter trace ``meters/trace-*.csv``.

What the runner writes, and when (so what can be live):

- ``meters/trace-<stamp>.csv``: every meter reading as it arrives (line-buffered): live power.
- ``raw/.partial-<sample>/attempt-<k>/``: created when an attempt starts; its ``iperf3-<rx>.json``
  (with per-second intervals) once every client has exited (iperf3 3.12's ``-J`` writes its JSON at
  exit only, so throughput is shown from the end of the transfer, during the radio tail), and
  ``meter-<rx>.csv`` (the transfer window +- 1 s) after that.
- ``raw/<sample>/`` and the sample's records in ``samples.jsonl``: once the sample (with its idle
  wait) is done. The records name the interfaces that carried data (``iface_bytes``), the
  transfer window and the tail (``idle_wait_s``), and a policy sample's decisions.
"""
from __future__ import annotations

import csv
import io
import json
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaign.progress import ATTEMPT_TESTBED_FILE, campaign_progress, lock_holder_pid, read_events
from harness.errors import ConfigError, StoreError
from harness.campaign.store import MAKE_UP_FILE, Campaign, complete_samples
from harness.campaign.summary import summarize

#: Seconds of meter trace kept for the running sample's chart.
LIVE_WINDOW_S = 90.0
#: How much of a meter trace's end is read when the watcher opens it (its older readings are not shown).
TRACE_TAIL_BYTES = 4 * 1024 * 1024
#: At most this many points per receiver are pushed (the page needs no more for a 90 s chart).
MAX_POINTS = 200
#: At most this many failures, flags, repairs and decisions are pushed (newest kept).
MAX_EVENTS = 200


def energy_label(manifest: dict) -> str:
    """``emulated (power profile X)`` or ``measured``: what every energy chart and column says."""
    tb = manifest.get("testbed") or {}
    source = str(tb.get("energy_source") or "")
    if source.startswith("emulated") or tb.get("kind") == "emulated":
        profile = ((tb.get("emulation") or {}).get("power_profile") or {}).get("name")
        return f"emulated (power profile {profile})" if profile else "emulated"
    return "measured"


@dataclass
class _Tail:
    """A file read from where the last read stopped, complete lines only."""

    path: Path
    offset: int = 0
    #: Started mid-file: the first line read is a partial one.
    skip_first: bool = False
    rest: bytes = b""

    def new_lines(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.rest + data
        keep = data.rfind(b"\n") + 1
        self.rest = data[keep:]
        lines = data[:keep].splitlines()
        if self.skip_first and lines:
            self.skip_first = False
            lines = lines[1:]
        return lines


def trace_testbed(path: Path) -> str:
    """The testbed copy a meter trace belongs to: ``trace-<stamp>-<testbed>.csv`` (``mplab run --testbeds K``);
    "" for the one trace of a single testbed (``trace-<stamp>.csv``)."""
    parts = path.stem.split("-", 2)
    return parts[2] if len(parts) == 3 else ""


@dataclass
class _Trace:
    """The session's continuous meter trace(s): the last ``LIVE_WINDOW_S`` of readings per (testbed copy,
    receiver): parallel copies name their receivers alike, so a receiver's name alone mixes two meters."""

    tails: dict[Path, _Tail] = field(default_factory=dict)
    points: dict[tuple[str, str], deque] = field(default_factory=dict)

    def update(self, meters_dir: Path) -> None:
        try:
            files = sorted(meters_dir.glob("trace-*.csv"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return
        if not files:
            return
        newest = files[-1].stat().st_mtime
        for path in files:
            if path not in self.tails and newest - path.stat().st_mtime < 60:  # this session's (parallel copies)
                # A trace grows by ~1 MB per meter-hour: start near its end, enough for LIVE_WINDOW_S of 9+ meters.
                size = path.stat().st_size
                self.tails[path] = _Tail(path, offset=max(0, size - TRACE_TAIL_BYTES), skip_first=size > TRACE_TAIL_BYTES)
        for path, tail in self.tails.items():
            for line in tail.new_lines():
                self._add(trace_testbed(path), line)

    def _add(self, testbed: str, line: bytes) -> None:
        row = line.decode(errors="replace").split(",")
        if len(row) < 7 or row[0] == "receiver" or not row[6]:
            return  # the header, or a fault line (no watts)
        try:
            t, w = float(row[2]), float(row[6])
        except ValueError:
            return
        q = self.points.setdefault((testbed, row[0]), deque())
        q.append((t, w))
        while q and q[0][0] < t - LIVE_WINDOW_S:
            q.popleft()

    def since(self, t0: float, testbed: str | None = None) -> dict[str, list[tuple[float, float]]]:
        """Per receiver of ``testbed`` (None: of every trace, for a single testbed) its readings from ``t0``."""
        return {rx: _thin([p for p in q if p[0] >= t0]) for (tb, rx), q in self.points.items()
                if testbed is None or tb == testbed}


def _thin(points: list, limit: int = MAX_POINTS) -> list:
    step = max(1, -(-len(points) // limit))
    return points[::step]


def iperf_intervals(path: Path, start: float | None = None) -> list[tuple[float, float]]:
    """(epoch end of interval, Mbit/s) per interval of an iperf3 JSON file; [] if absent or not JSON yet.

    ``start``: when the transfer began (a record's ``window_start``); without it iperf3's own start
    stamp, which has whole seconds only.
    """
    try:
        doc = json.loads(path.read_text())
        t0 = float(start if start is not None else doc["start"]["timestamp"]["timesecs"])
        return [(t0 + float(iv["sum"]["end"]), float(iv["sum"]["bits_per_second"]) / 1e6)
                for iv in doc.get("intervals") or []]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def meter_csv(path: Path) -> list[tuple[float, float]]:
    """(wall_s, watts) of a sample's ``meter-<rx>.csv``."""
    try:
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        return _thin([(float(r["wall_s"]), float(r["watts"])) for r in rows])
    except (OSError, ValueError, KeyError):
        return []


class CampaignView:
    """A read-only, incremental view of one campaign directory."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.path = path
        self.manifest = manifest
        self.plan: list[str] = self._plan()
        self.receivers = _planned_receivers(manifest, self.plan)
        self._samples = _Tail(path / "samples.jsonl")
        self._records: list[dict] = []
        self._trace = _Trace()
        self._stamp: tuple | None = None
        #: Bumped whenever what ``snapshot()`` shows may have changed.
        self.version = 0

    # --------------------------------------------------------------- change detection

    def _stat(self) -> tuple:
        out = []
        for name in ("samples.jsonl", "sessions.jsonl", "raw", MAKE_UP_FILE):
            try:
                st = os.stat(self.path / name)
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        out.append(lock_holder_pid(self.path / ".lock"))
        out.append(self.running_attempt())
        return tuple(out)

    def poll(self) -> bool:
        """Read what was appended since the last poll; True if the snapshot changed."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        plan = self._plan()
        if plan != self.plan:   # a make-up added samples
            self.plan, self.receivers = plan, _planned_receivers(self.manifest, plan)
        for line in self._samples.new_lines():
            try:
                self._records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a corrupt line: `mplab status` names it; the page shows the rest
        self.version += 1
        return True

    def _plan(self) -> list[str]:
        """The campaign's plan with what make-ups added (``Campaign.plan``); the manifest's alone when
        makeup.jsonl cannot be read (`mplab status` names why)."""
        try:
            return Campaign(self.path, self.manifest).plan
        except (StoreError, KeyError, TypeError, AttributeError):
            return list(self.manifest.get("plan") or [])

    def records(self) -> list[dict]:
        """Records of complete samples (a torn tail is left out, as ``Campaign.records`` does)."""
        done = complete_samples(self._records)
        return [r for r in self._records if r.get("sample_id") in done]

    # --------------------------------------------------------------- the running sample

    def _attempts(self) -> list[Path]:
        """Every ``raw/.partial-<id>/attempt-<k>`` directory, newest first."""
        try:
            partial = [d for d in (self.path / "raw").iterdir() if d.name.startswith(".partial-")]
        except OSError:
            return []
        attempts = [a for d in partial for a in d.glob("attempt-*") if a.is_dir()]
        return sorted(attempts, key=lambda a: a.stat().st_mtime, reverse=True)

    def running_attempt(self) -> Path | None:
        """The newest ``raw/.partial-<id>/attempt-<k>`` directory (a sample being run), or None."""
        return next(iter(self._attempts()), None)

    def running_attempts(self) -> dict[str, Path]:
        """Per testbed copy of the last session (``mplab run --testbeds K``), the newest attempt it runs;
        ``{"": newest}`` for a single testbed (or attempts that do not name theirs)."""
        attempts = self._attempts()
        if not attempts:
            return {}
        starts = [e for e in read_events(self.path / "sessions.jsonl") if e.get("event") in ("start", "resume")]
        names = list(starts[-1].get("testbeds") or []) if starts else []
        if len(names) < 2:
            return {"": attempts[0]}
        out: dict[str, Path] = {}
        for a in attempts:
            try:
                tb = (a / ATTEMPT_TESTBED_FILE).read_text().strip()
            except OSError:
                continue
            if tb in names and tb not in out:
                out[tb] = a
        return out or {"": attempts[0]}

    def live(self, now: float | None = None) -> dict:
        """The running sample(s): receivers' power from the meter trace, iperf3 intervals once the transfer ended.

        With several testbed copies running at once, every copy's running sample is shown, each receiver
        named ``<testbed> <receiver>`` (the copies name their receivers alike) and powered from that copy's trace.
        """
        now = time.time() if now is None else now
        self._trace.update(self.path / "meters")
        running = self.running_attempts()
        if not running or lock_holder_pid(self.path / ".lock") is None:
            return {"running": False, "now": now}
        several = len(running) > 1
        rxs: list[str] = []
        power: dict[str, list] = {}
        iperf: dict[str, list] = {}
        started_all, sids, attempts = [], [], []
        for tb, adir in sorted(running.items()):
            sid = adir.parent.name.removeprefix(".partial-")
            try:
                started = adir.stat().st_ctime  # the attempt's directory is made when it starts
            except OSError:
                started = now
            trace = self._trace.since(started - 5.0, tb if several else None)
            names = self.receivers.get(sid) or sorted(trace)
            for rx in names:
                label = f"{tb} {rx}" if several else rx
                rxs.append(label)
                power[label] = trace.get(rx, [])
                iperf[label] = iperf_intervals(adir / f"iperf3-{rx}.json")
            started_all.append(started)
            sids.append(f"{sid} on {tb}" if several else sid)
            attempts.append(adir.name.removeprefix("attempt-"))
        ended = any(iperf.values())
        return {"running": True, "now": now, "sample_id": ", ".join(sids), "attempt": ", ".join(attempts),
                "started_at": min(started_all), "receivers": rxs,
                "phase": "radio tail: waiting until the receivers are idle" if ended else
                         "set-up / transfer (throughput appears when every iperf3 client has exited)",
                "power": power, "iperf": iperf,
                "transfer": {rx: [iv[0][0] - 1.0, iv[-1][0]] for rx, iv in iperf.items() if iv}}

    # --------------------------------------------------------------- the whole campaign

    def snapshot(self, now: float | None = None) -> dict:
        """Everything the page shows apart from the running sample (``live``)."""
        now = time.time() if now is None else now
        recs = self.records()
        prog, sessions = campaign_progress(self.path, self.plan, recs, now=now)
        return {"version": self.version, "now": now, "campaign": self.manifest.get("campaign"),
                "path": str(self.path), "testbed": (self.manifest.get("testbed") or {}).get("kind"),
                "inventory": (self.manifest.get("testbed") or {}).get("inventory"),
                "energy": energy_label(self.manifest),
                "energy_kind": "measured" if energy_label(self.manifest) == "measured" else "emulated",
                "progress": prog.as_dict(),
                "sessions": [s.__dict__ for s in sessions], "cases": _cases(recs), "events": _events(recs),
                "decisions": _decisions(recs), "samples": _samples(recs), "last_sample": self._last_sample(recs)}

    def _last_sample(self, recs: list[dict]) -> dict | None:
        """``_last_sample``, its power from the session's trace when it still holds the transfer and the tail
        (the sample's own meter CSV covers only the transfer window +- 1 s)."""
        last = _last_sample(self.path, recs)
        if last is None:
            return None
        self._trace.update(self.path / "meters")
        for rx in last["receivers"]:
            span = [t for w in (rx["transfer"], rx["tail"]) if w for t in w if t]
            if not span:
                continue
            # this copy's trace (``--testbeds K``: trace-<stamp>-<testbed>.csv), else the single testbed's
            q = self._trace.points.get((rx.get("testbed") or "", rx["receiver"])) or \
                self._trace.points.get(("", rx["receiver"]), ())
            pts = [p for p in q if min(span) - 2 <= p[0] <= max(span) + 1]
            if pts and pts[0][0] <= min(span):
                rx["power"] = _thin(pts)
        return last


def _planned_receivers(manifest: dict, plan: list[str]) -> dict[str, list[str]]:
    """Sample id -> its receivers, by planning the manifest's scenario on its inventory again (pure); ``plan``:
    the campaign's, with what make-ups added."""
    from harness.config.inventory import Inventory
    from harness.config.load import parse_model
    from harness.config.scenario import Scenario
    from harness.campaign.plan import plan_samples
    from harness.errors import MplabError

    try:
        sc = parse_model(Scenario, manifest["scenario"], "manifest (scenario)")
        inv = parse_model(Inventory, manifest["inventory"], "manifest (inventory)")
        return {p.sample_id: list(p.receivers) for p in plan_samples(sc, inv, plan)}
    except (MplabError, KeyError, TypeError):
        return {}  # the page then names the receivers the meter trace has


def _cases(recs: list[dict]) -> list[dict]:
    return [{"case": c.case_id, "ok": c.samples_ok, "failed": c.samples_failed, "flagged": c.flagged_records,
             "throughput_mbit": c.mean_throughput_mbit, "throughput_ci": c.throughput_ci_mbit, "n_throughput":
             c.n_throughput, "energy_j": c.mean_energy_j, "energy_ci": c.energy_ci_j, "n_energy": c.n_energy,
             "power_w": c.mean_power_w} for c in summarize(recs)]


def _events(recs: list[dict]) -> list[dict]:
    """Failures (with their reasons), flags and repairs, newest first."""
    out = []
    for r in recs:
        base = {"sample_id": r.get("sample_id"), "receiver": r.get("receiver"), "time": r.get("window_end")
                or r.get("started_at")}
        if r.get("status") != "ok" or r.get("sample_status") != "ok":
            out.append({**base, "kind": "failed", "text": r.get("error") or "another receiver of the sample failed"})
        out += [{**base, "kind": "flag", "text": f} for f in r.get("flags") or []]
        out += [{**base, "kind": "repair", "text": f} for f in r.get("repairs") or []]
    return out[::-1][:MAX_EVENTS]


def _decisions(recs: list[dict]) -> list[dict]:
    """A policy sample's decision per receiver (assignment, predicted energies, caps), newest first."""
    keys = ("sample_id", "receiver", "policy", "assignment", "predicted_energy_j", "caps_mbit", "caps_by",
            "steering", "decision_latency_s")
    return [{k: r.get(k) for k in keys} for r in recs if r.get("policy")][::-1][:MAX_EVENTS]


def _samples(recs: list[dict]) -> list[dict]:
    """Per sample: when it ran, its status, per-receiver mean throughput and energy (for the page's charts)."""
    by: dict[str, dict] = {}
    for r in recs:
        s = by.setdefault(r["sample_id"], {"sample_id": r["sample_id"], "case": r.get("case_id"),
                                           "status": r.get("sample_status"), "time": None, "rx": {}})
        s["time"] = max(filter(None, [s["time"], r.get("window_end"), r.get("started_at")]), default=None)
        s["rx"][r.get("receiver")] = {"throughput_mbit": r.get("throughput_mbit"), "energy_j": r.get("energy_j"),
                                      "flagged": bool(r.get("flags"))}
    return list(by.values())[-1000:]


def _last_sample(path: Path, recs: list[dict]) -> dict | None:
    """The last recorded sample: per receiver its windows, interfaces' bytes, energy; power and iperf3 from raw/."""
    if not recs:
        return None
    sid = recs[-1]["sample_id"]
    rows = [r for r in recs if r["sample_id"] == sid]
    adir = path / "raw" / sid / f"attempt-{rows[0].get('attempts') or 1}"
    out = {"sample_id": sid, "status": rows[0].get("sample_status"), "receivers": []}
    for r in rows:
        rx = r.get("receiver")
        w_end = r.get("window_end")
        out["receivers"].append({
            "receiver": rx, "testbed": r.get("testbed"), "mode": r.get("mode"), "status": r.get("status"),
            "error": r.get("error"),
            "transfer": [r.get("window_start"), w_end] if w_end else None,
            "tail": [w_end, w_end + r["idle_wait_s"]] if w_end and r.get("idle_wait_s") is not None else None,
            "iface_bytes": r.get("iface_bytes"), "iface_throughput_mbit": r.get("iface_throughput_mbit"),
            "throughput_mbit": r.get("throughput_mbit"), "energy_j": r.get("energy_j"),
            "tail_energy_j": r.get("tail_energy_j"), "flags": r.get("flags") or [],
            "power": meter_csv(adir / f"meter-{rx}.csv"),
            "iperf": iperf_intervals(adir / f"iperf3-{rx}.json", r.get("window_start"))})
    return out


def open_view(run_dir: Path):
    """The campaign at ``run_dir`` as a ``CampaignView``; ``ConfigError`` (exit 2) naming what is wrong."""
    from harness.campaign.store import is_campaign_dir, read_manifest, upgrade_manifest

    mf = run_dir / "manifest.json"
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such campaign directory (give runs/<campaign>)")
    if not is_campaign_dir(run_dir):
        raise ConfigError(f"{run_dir}: not a campaign directory (no manifest.json)")
    # The store's own reader: a damaged or newer manifest is StoreError (4), as for status, resume, dataset, report.
    return CampaignView(run_dir, upgrade_manifest(read_manifest(mf), str(mf)))
