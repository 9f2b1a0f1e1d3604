"""The campaign store: ``runs/<campaign>/``.

Layout (every file carries ``schema_version``; fields are documented in
docs/records.md)::

    manifest.json        scenario, inventory (copies and digests), plan, metadata; written once
    sessions.jsonl       one line per run/resume of the campaign (start, end, outcome)
    samples.jsonl        one record per receiver per sample; a sample's records are one append
    raw/<sample_id>/     iperf3 JSON, meter traces, qdisc statistics of every attempt
    raw/.aborted/        partial raw output of samples a crash interrupted (kept, never deleted)

Completed samples are never rewritten. A sample's raw directory is renamed into
place before its records are appended with a single ``write`` and ``fsync``; a crash
between the two leaves raw output without records, which ``repair()`` moves aside
so the sample runs again. A torn last line (a crash inside the write) is cut off into
``samples.jsonl.torn-<time>`` and its sample runs again.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from harness.errors import StoreError
from harness.files import atomic_write

SCHEMA_VERSION = 1


class Campaign:
    """One campaign directory."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.path = path
        self.manifest = manifest

    @property
    def id(self) -> str:
        return self.manifest["campaign"]

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    @classmethod
    def create(cls, root: Path, campaign_id: str, manifest: dict) -> Campaign:
        """Create ``root/campaign_id`` with ``manifest``; refuse to overwrite an existing campaign."""
        path = root / campaign_id
        if (path / "manifest.json").exists():
            raise StoreError(f"campaign {path} already exists (resume it with `mplab run --resume {path}`)")
        (path / "raw").mkdir(parents=True, exist_ok=True)
        doc = {"schema_version": SCHEMA_VERSION, "campaign": campaign_id, **manifest}
        atomic_write(path / "manifest.json", (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode())
        return cls(path, doc)

    @classmethod
    def open(cls, path: str | Path) -> Campaign:
        """Open an existing campaign, upgrading older manifests and refusing newer ones."""
        p = Path(path)
        mf = p / "manifest.json"
        if not mf.exists():
            raise StoreError(f"{p} is not a campaign (no manifest.json)")
        try:
            doc = json.loads(mf.read_text())
        except json.JSONDecodeError as exc:
            raise StoreError(f"{mf}: not valid JSON ({exc})") from None
        return cls(p, upgrade_manifest(doc, str(mf)))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the campaign's lock: one process runs a campaign at a time."""
        fd = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(f"campaign {self.path} is being run by another process") from None
            yield
        finally:
            os.close(fd)

    # ----------------------------------------------------------------- records

    def records(self) -> list[dict]:
        """All complete records, in the order they were appended (a torn last line is skipped)."""
        if not self.samples_path.exists():
            return []
        out = []
        with open(self.samples_path, "rb") as f:
            for lineno, line in enumerate(f, start=1):
                if not line.endswith(b"\n"):
                    break  # torn tail: repair() cuts it off
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise StoreError(f"{self.samples_path}:{lineno}: corrupt record ({exc})") from None
                out.append(upgrade_record(rec, f"{self.samples_path}:{lineno}"))
        return out

    def completed(self) -> set[str]:
        """Ids of samples whose records are stored (whatever their status)."""
        return {r["sample_id"] for r in self.records()}

    def append(self, records: list[dict]) -> None:
        """Append one sample's records as a single write, then fsync. A failed write raises."""
        if not records:
            raise StoreError("refusing to append an empty sample")
        data = b"".join(json.dumps(r, separators=(",", ":"), sort_keys=False).encode() + b"\n" for r in records)
        fd = os.open(self.samples_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise StoreError(f"{self.samples_path}: short write ({written} of {len(data)} bytes)")
            os.fsync(fd)
        except OSError as exc:
            raise StoreError(f"{self.samples_path}: cannot append ({exc.strerror})") from None
        finally:
            os.close(fd)

    # ----------------------------------------------------------------- raw output

    def partial_dir(self, sample_id: str) -> Path:
        """Where a sample's raw output is written while it runs."""
        d = self.path / "raw" / f".partial-{sample_id}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def commit_raw(self, sample_id: str) -> Path:
        """Move a finished sample's raw output into place (before its records are appended)."""
        src = self.path / "raw" / f".partial-{sample_id}"
        dst = self.path / "raw" / sample_id
        if dst.exists():
            self._aside(dst)
        os.replace(src, dst)
        return dst

    def _aside(self, path: Path) -> Path:
        aborted = self.path / "raw" / ".aborted"
        aborted.mkdir(exist_ok=True)
        target = aborted / f"{path.name.removeprefix('.partial-')}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        os.replace(path, target)
        return target

    def repair(self) -> list[str]:
        """Make the directory consistent after a crash; returns what was done (nothing is deleted)."""
        done = []
        if self.samples_path.exists():
            data = self.samples_path.read_bytes()
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                torn = self.path / f"samples.jsonl.torn-{time.strftime('%Y%m%dT%H%M%S')}"
                torn.write_bytes(data[keep:])
                with open(self.samples_path, "r+b") as f:
                    f.truncate(keep)
                    os.fsync(f.fileno())
                done.append(f"cut a torn last record ({len(data) - keep} bytes) into {torn.name}")
        recorded = self.completed()
        raw = self.path / "raw"
        for d in sorted(raw.iterdir()) if raw.exists() else []:
            if d.name == ".aborted" or not d.is_dir():
                continue
            sid = d.name.removeprefix(".partial-")
            if d.name.startswith(".partial-") or sid not in recorded:
                target = self._aside(d)
                done.append(f"moved unfinished raw output of {sid} to {target.relative_to(self.path)}")
        return done

    # ----------------------------------------------------------------- sessions

    def log_session(self, event: dict) -> None:
        """Append a line to sessions.jsonl (run started, resumed, finished, interrupted)."""
        line = json.dumps({"schema_version": SCHEMA_VERSION, "time": time.time(), **event}) + "\n"
        with open(self.path / "sessions.jsonl", "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def upgrade_manifest(doc: dict, source: str) -> dict:
    """Bring a manifest to the current schema; refuse newer ones."""
    v = doc.get("schema_version")
    if not isinstance(v, int):
        raise StoreError(f"{source}: no schema_version")
    if v > SCHEMA_VERSION:
        raise StoreError(f"{source}: schema_version {v} is newer than this mplab understands "
                         f"({SCHEMA_VERSION}); upgrade mplab")
    return doc


def upgrade_record(rec: dict, source: str) -> dict:
    """Bring a sample record to the current schema; refuse newer ones."""
    v = rec.get("schema_version")
    if not isinstance(v, int):
        raise StoreError(f"{source}: record without schema_version")
    if v > SCHEMA_VERSION:
        raise StoreError(f"{source}: record schema_version {v} is newer than this mplab understands; upgrade mplab")
    return rec
