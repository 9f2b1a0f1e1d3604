"""The campaign store: ``runs/<campaign>/``.

Layout (every file carries ``schema_version``; fields are documented in
docs/records.md)::

    manifest.json        scenario, inventory (copies and digests), plan, metadata; written once
    sessions.jsonl       one line per run/resume of the campaign (start, end, outcome)
    samples.jsonl        one record per receiver per sample; a sample's records are one append
    makeup.jsonl         samples added to the plan by `mplab run --resume --make-up`, one line per addition
    raw/<sample_id>/     iperf3 JSON, meter traces, qdisc statistics of every attempt
    raw/.aborted/        partial raw output of samples a crash interrupted (kept, never deleted)

Completed samples are never rewritten. A sample's raw directory is renamed into
place before its records are appended with a single ``write`` and ``fsync``; a crash
between the two leaves raw output without records, which ``repair()`` moves aside
so the sample runs again. A torn last line (a crash inside the write) is cut off into
``samples.jsonl.torn-<time>`` and its sample runs again.

A full disk (``DiskFull``, exit 6): a campaign is refused before anything is created when less
than ``MIN_FREE_BYTES`` are free; mid-run, an append that cannot be completed is cut back to the
last whole sample (finished records stay intact), and the session's last line still gets written
from a small reserve (``.session-reserve``) held while the campaign runs. Free space, then resume.
"""
from __future__ import annotations

import codecs
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import Busy, ConfigError, DiskFull, StoreError, is_disk_full
from harness.files import atomic_write, held_lock_text, try_flock, write_lock_text

#: 2: records carry a ``checksum`` and typed ``repairs`` ({attempt, what}); manifests and session lines are
#: unchanged from 1 (``upgrade_record`` reads schema-1 records).
SCHEMA_VERSION = 2

#: Longest manifest.json read: a paper sweep's plan (6,075 sample ids) and copies of its scenario and inventory
#: are well under 1 MiB; anything far bigger is not a manifest, and is refused without being read.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: Longest line of samples.jsonl read: a record is 1-3 KiB. A longer line is refused without being read whole.
MAX_RECORD_BYTES = 1024 * 1024

#: A campaign id is one directory name under the runs directory (it is also written into every record).
CAMPAIGN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

#: Samples added to a campaign's plan after it was made (``Campaign.add_make_up``); the manifest is never rewritten.
MAKE_UP_FILE = "makeup.jsonl"
#: A sample id: its case, then ``-s`` and its index, at least three digits (``harness.campaign.plan``).
SAMPLE_ID = re.compile(r"(?P<case>.+)-s(?P<index>[0-9]{3,})", re.ASCII)


def split_sample_id(sample_id: str) -> tuple[str, int] | None:
    """(case, index) of a sample id as the planner writes it (``<case>-s<index:03d>``, index >= 1), else None."""
    m = SAMPLE_ID.fullmatch(sample_id)
    if m is None or int(m["index"]) < 1 or sample_id != f"{m['case']}-s{int(m['index']):03d}":
        return None
    return m["case"], int(m["index"])


def check_campaign_id(campaign_id: str) -> str:
    """``campaign_id`` if it names one plain directory; ``ConfigError`` (exit 2) otherwise (``../x``, ``a/b``)."""
    if not CAMPAIGN_ID.match(campaign_id) or ".." in campaign_id:
        raise ConfigError(f"{campaign_id!r} is not a campaign id: use 1-100 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit, no '..' (it names a directory under the runs directory)",
                          field="--id")
    return campaign_id


#: Refuse to start (or resume) a campaign with less free space than this under its directory: a sample's
#: raw output (iperf3 JSON, meter windows) is tens of kB, the continuous meter trace grows ~1 MB an hour.
MIN_FREE_BYTES = 8 * 1024 * 1024
#: Held while a campaign runs, released to write the session's last line when the disk fills.
RESERVE_BYTES = 64 * 1024


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_free_space(directory: Path, need: int = MIN_FREE_BYTES) -> None:
    """``DiskFull`` (nothing created) unless ``need`` bytes are free where ``directory`` is (or would be)."""
    where = _existing_ancestor(directory)
    try:
        st = os.statvfs(where)
    except OSError:
        return  # cannot tell: the writes will say
    # Not a disk at all, or read-only: a store that cannot be written (4), not a full disk (6).
    if st.f_flag & os.ST_RDONLY or st.f_blocks == 0:
        what = "a read-only file system" if st.f_flag & os.ST_RDONLY else "a file system that holds no files (proc, sysfs)"
        raise StoreError(f"{directory}: cannot write there ({where} is on {what}); nothing was run. Use --runs-dir "
                         "on a writable disk")
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise DiskFull(f"{directory}: only {free // 1024} KiB free on its disk (at least {need // (1024 * 1024)} "
                       "MiB needed); nothing was run. Free space (or use --runs-dir on another disk), then run again")


def disk_full_message(path: Path, done: int, planned: int) -> str:
    """The one line a run that hit a full disk ends with."""
    return (f"{path}: the disk is full (no space left on device): {done}/{planned} samples are recorded and kept "
            f"intact; free space, then `mplab run --resume {path}`")


def _append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` with one write and fsync; on any failure cut the file back to what it was (no torn tail)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):  # a disk that filled mid-write: the rest would fail with ENOSPC
                raise OSError(28, os.strerror(28), str(path))
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, before)
            raise
    finally:
        os.close(fd)


def _cut_aside(path: Path, data: bytes, keep: int) -> Path:
    """Cut ``path`` (whose content is ``data``) back to its first ``keep`` bytes; the rest is kept in
    ``<name>.torn-<time>`` beside it, which is returned."""
    torn = path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}")
    torn.write_bytes(data[keep:])
    with open(path, "r+b") as f:
        f.truncate(keep)
        os.fsync(f.fileno())
    return torn


def check_writable(directory: Path) -> None:
    """``StoreError`` unless files can be created in ``directory`` (made if missing): checked before anything runs.

    ``DiskFull`` first when the disk has less than ``MIN_FREE_BYTES`` free (before the directory is made).
    """
    check_free_space(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{os.getpid()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise StoreError(f"{directory}: cannot write there ({exc.strerror}); nothing was run") from None


class Campaign:
    """One campaign directory."""

    def __init__(self, path: Path, manifest: dict) -> None:
        self.path = path
        self.manifest = manifest
        #: makeup.jsonl's (size, mtime, inode) and its lines when last read (``make_ups``).
        self._make_ups: tuple[tuple, list[dict]] | None = None

    @property
    def id(self) -> str:
        return self.manifest["campaign"]

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    @classmethod
    def create(cls, root: Path, campaign_id: str, manifest: dict) -> Campaign:
        """Create ``root/campaign_id`` with ``manifest``; refuse to overwrite an existing campaign."""
        path = root / check_campaign_id(campaign_id)
        if (path / "manifest.json").exists():
            raise StoreError(f"campaign {path} already exists (resume it with `mplab run --resume {path}`)")
        made = not path.exists()
        (path / "raw").mkdir(parents=True, exist_ok=True)
        doc = {"schema_version": SCHEMA_VERSION, "campaign": campaign_id, **manifest}
        try:
            atomic_write(path / "manifest.json", (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode())
        except OSError as exc:
            if made:  # nothing of the campaign exists yet: leave nothing behind
                shutil.rmtree(path, ignore_errors=True)
            if is_disk_full(exc):
                raise DiskFull(f"{path}: the disk is full; the campaign was not created. Free space, then run "
                               "again") from exc
            raise StoreError(f"{path / 'manifest.json'}: cannot be written ({exc.strerror})") from None
        return cls(path, doc)

    @classmethod
    def open(cls, path: str | Path) -> Campaign:
        """Open an existing campaign, upgrading older manifests and refusing newer ones."""
        p = Path(path)
        mf = p / "manifest.json"
        if not mf.exists():
            if any((p / name).exists() for name in ("samples.jsonl", "sessions.jsonl")):
                # A campaign's own files without its manifest: the store is damaged, not the argument.
                raise StoreError(f"{p}: a campaign directory without its manifest.json (restore it from a copy)")
            raise ConfigError(f"{p} is not a campaign directory (no manifest.json)")
        return cls(p, upgrade_manifest(read_manifest(mf), str(mf)))

    @property
    def make_up_path(self) -> Path:
        return self.path / MAKE_UP_FILE

    @property
    def plan(self) -> list[str]:
        """The sample ids this campaign runs: the manifest's plan, then those added by ``add_make_up``."""
        return list(self.manifest.get("plan") or []) + [sid for entry in self.make_ups() for sid in entry["samples"]]

    def make_ups(self) -> list[dict]:
        """Every addition to the plan (``add_make_up``), oldest first: ``{"schema_version", "time", "samples",
        "short"}``; read again only when makeup.jsonl changed.

        A last line without its end is an addition cut short by a crash (nothing of it ran: the samples run only
        after the line is written) and is left out. ``StoreError`` naming the line for anything else unreadable,
        a newer schema, or a sample id that is not ``<case>-s<index>`` of a case of the plan, or one the plan
        already has."""
        try:
            st = os.stat(self.make_up_path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"{self.make_up_path}: cannot be read ({exc.strerror})") from None
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        if self._make_ups is not None and self._make_ups[0] == stamp:
            return self._make_ups[1]
        try:
            data = self.make_up_path.read_bytes()
        except OSError as exc:
            raise StoreError(f"{self.make_up_path}: cannot be read ({exc.strerror})") from None
        seen = set(self.manifest.get("plan") or [])
        cases = {split[0] for sid in seen if (split := split_sample_id(sid))}
        out = []
        for lineno, line in enumerate(data.split(b"\n")[:-1], start=1):   # the text after the last end: cut short
            where = f"{self.make_up_path}:{lineno}"
            try:
                entry = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError) as exc:
                raise StoreError(f"{where}: not a line of samples added to the plan ({_short(exc)}); restore the "
                                 "file from a copy") from None
            sids = entry.get("samples") if isinstance(entry, dict) else None
            if not isinstance(sids, list) or not all(isinstance(x, str) for x in sids):
                raise StoreError(f"{where}: no \"samples\" list of sample ids; restore the file from a copy")
            if "schema_version" in entry:
                _check_version(entry, where, "line")
            for sid in sids:
                split = split_sample_id(sid)
                if split is None or split[0] not in cases:
                    raise StoreError(f"{where}: sample id {sid!r} is not <case>-s<index> of a case of the "
                                     "campaign's plan")
                if sid in seen:
                    raise StoreError(f"{where}: sample id {sid!r} is already in the plan")
                seen.add(sid)
            out.append(entry)
        self._make_ups = (stamp, out)
        return out

    def add_make_up(self, samples: list[str], short: dict[str, int]) -> None:
        """Add ``samples`` to the plan (one line of makeup.jsonl, one write and fsync); ``short``: how many usable
        samples each case lacked. A line a crash cut short before is first moved aside into
        ``makeup.jsonl.torn-<time>`` (kept, as ``repair`` keeps a torn record). Hold the lock."""
        try:
            data = self.make_up_path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise StoreError(f"{self.make_up_path}: cannot be read ({exc.strerror})") from None
        keep = data.rfind(b"\n") + 1
        try:
            if keep < len(data):
                _cut_aside(self.make_up_path, data, keep)
            line = json.dumps({"schema_version": SCHEMA_VERSION, "time": time.time(), "samples": samples,
                               "short": short}) + "\n"
            _append_whole(self.make_up_path, line.encode())
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFull(f"{self.make_up_path}: cannot append: the disk is full; nothing was added") from exc
            raise StoreError(f"{self.make_up_path}: cannot be written ({exc.strerror}); nothing was added") from None

    def torn_tail(self) -> TornTail | None:
        """The torn end of samples.jsonl (a write cut short, or junk appended), or None when it ends whole."""
        return self._scan_all()[2]

    def unused(self) -> list[str]:
        """What a reader of this campaign leaves out, one line each: damaged lines and a torn tail (with the
        samples it takes out). Every reader (status, dataset build, report) reports these; resume reruns them."""
        damaged, tail = self._scan_all()[1:]
        out = [d.describe(self.samples_path) for d in damaged]
        if tail is not None:
            out.append(tail.describe(self.samples_path))
        return out

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the campaign's lock: one process runs a campaign at a time (``Busy`` naming the other's pid)."""
        fd = try_flock(self.path / ".lock")
        if fd is None:
            pid = self.running_pid()
            raise Busy(f"campaign {self.path} is being run by another process" + (f" (pid {pid})" if pid else ""))
        try:
            write_lock_text(fd, f"{os.getpid()}\n")
            yield
        finally:
            os.close(fd)

    def running_pid(self) -> int | None:
        """The pid of the process running this campaign now, or None (read without taking the lock)."""
        text = held_lock_text(self.path / ".lock")
        if text is None:
            return None
        return int(text.strip()) if text.strip().isdigit() else -1

    def check_writable(self) -> None:
        """``StoreError`` unless records, raw output and session lines can be written (checked before a run)."""
        check_free_space(self.path)
        check_writable(self.path / "raw")
        for target in (self.samples_path, self.path / "sessions.jsonl"):
            try:
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.close(fd)
            except OSError as exc:
                raise StoreError(f"{target}: cannot be written ({exc.strerror}); nothing was run. Make the campaign "
                                 "directory writable, then resume") from None

    # ----------------------------------------------------------------- records

    def records(self) -> list[dict]:
        """The records of complete samples, in the order they were appended (damaged lines left out).

        A torn last line is skipped, and so are the surviving records of a sample whose other
        receivers' records were torn off (``repair()`` moves both aside). A damaged line (``damaged``)
        is never counted: its sample runs again on resume, and ``mplab status`` names the line.
        """
        recs = self._all_records()
        done = complete_samples(recs)
        return [r for r in recs if r.get("sample_id") in done]

    def _scan(self) -> tuple[list[dict], list[Damage]]:
        """(the sound records, the damaged lines): every whole line checked against its checksum and the plan.

        A sample's records are one append, so consecutive lines of one sample are one run of it. A run that
        comes after a complete sound run of the same sample is damaged (a second record); one that comes
        after an incomplete run (a receiver's record was damaged, so the sample ran again on resume)
        supersedes it: the earlier run's lines are then not counted either, so that a sample's records always
        come from one run.
        """
        recs, damaged, _ = self._scan_all()
        return recs, damaged

    def _scan_all(self) -> tuple[list[dict], list[Damage], TornTail | None]:
        """``_scan`` and the torn tail. ``StoreError`` (exit 4) naming the file, and the line, when samples.jsonl
        cannot be read as records at all: a directory, unreadable, a line that is not JSON or not UTF-8, a line
        longer than ``MAX_RECORD_BYTES`` (read no further than that)."""
        if not os.path.lexists(self.samples_path):
            return [], [], None
        plan = set(self.plan)
        damaged: list[Damage] = []
        groups: list[tuple[str | None, list[tuple[int, dict]]]] = []
        tail: TornTail | None = None
        try:
            f = open(self.samples_path, "rb")  # noqa: SIM115 - entered by the with below; its own errors are named here
        except IsADirectoryError:
            raise StoreError(f"{self.samples_path}: is a directory, not the campaign's record file") from None
        except OSError as exc:
            raise StoreError(f"{self.samples_path}: cannot be read ({exc.strerror})") from None
        with f:
            lineno, offset = 0, 0
            while True:
                try:
                    line = f.readline(MAX_RECORD_BYTES + 1)
                except OSError as exc:
                    raise StoreError(f"{self.samples_path}: cannot be read ({exc.strerror})") from None
                if not line:
                    break
                lineno += 1
                if len(line) > MAX_RECORD_BYTES:
                    raise StoreError(f"{self.samples_path}:{lineno}: longer than {MAX_RECORD_BYTES // 1024} KiB "
                                     "without a line end: not a record (junk, or another file written over it); "
                                     "restore the campaign from a copy")
                if not line.endswith(b"\n"):  # torn tail: repair() (resume) cuts it off
                    tail = TornTail(lineno, offset, len(line), junk=not line.strip(b"\0 \t\r"))
                    if not tail.junk:
                        _check_torn_record(line, f"{self.samples_path}:{lineno}")
                    break
                offset += len(line)
                try:
                    rec = json.loads(line.decode("utf-8"))  # decoded here: json.loads(bytes) guesses UTF-16/32
                except UnicodeDecodeError as exc:
                    raise StoreError(f"{self.samples_path}:{lineno}: not UTF-8 text (byte 0x{line[exc.start]:02x} "
                                     f"at column {exc.start + 1}): not a record; is it a binary file?") from None
                except ValueError as exc:
                    raise StoreError(f"{self.samples_path}:{lineno}: corrupt record ({_short(exc)})") from None
                if not isinstance(rec, dict):
                    damaged.append(Damage(lineno, None, "not a JSON object"))
                    continue
                source = f"{self.samples_path}:{lineno}"
                why = checksum_damage(rec) if _check_version(rec, source, "record") else None
                rec = upgrade_record(rec, source)
                why = why or record_damage(rec, self.id, plan)
                if why is not None:
                    damaged.append(Damage(lineno, rec.get("sample_id"), why))
                    continue
                sid = rec.get("sample_id")
                # A new run: another sample, or a receiver this run already has (the same sample appended again).
                if not groups or groups[-1][0] != sid or any(r.get("receiver") == rec.get("receiver")
                                                             for _, r in groups[-1][1]):
                    groups.append((sid, []))
                groups[-1][1].append((lineno, rec))
        kept: dict[str | None, list[tuple[int, dict]]] = {}
        for sid, run in groups:
            earlier = kept.get(sid)
            if earlier is not None and sid in complete_samples([r for _, r in earlier]):
                damaged += [Damage(ln, sid, f"a second record of sample {sid} receiver {r.get('receiver')} "
                                            f"(the first run is at line {earlier[0][0]})") for ln, r in run]
                continue
            if earlier is not None:
                damaged += [Damage(ln, sid, f"superseded: sample {sid} (incomplete here) ran again at line "
                                            f"{run[0][0]}") for ln, _ in earlier]
            kept[sid] = run
        damaged.sort(key=lambda d: d.line)
        recs = [r for _, r in sorted(ln_r for run in kept.values() for ln_r in run)]
        if tail is not None:  # the complete lines of the torn sample are left out with it (records() drops them)
            done = complete_samples(recs)
            last = groups[-1] if groups else None
            if last is not None and last[0] not in done and kept.get(last[0]) is last[1]:
                tail = dataclasses.replace(tail, sample_id=last[0], lines_before=len(last[1]))
        return recs, damaged, tail

    def _all_records(self) -> list[dict]:
        return self._scan()[0]

    def damaged(self) -> list[Damage]:
        """Lines of samples.jsonl that parse but cannot be trusted (checksum, plan, campaign), with why."""
        return self._scan()[1]

    def completed(self) -> set[str]:
        """Ids of samples whose records are all stored, one per receiver (whatever their status)."""
        return complete_samples(self._all_records())

    def append(self, records: list[dict]) -> None:
        """Append one sample's records as a single write, then fsync. A failed write raises and leaves
        the file as it was (``DiskFull`` when the disk is full)."""
        if not records:
            raise StoreError("refusing to append an empty sample")
        data = b"".join(json.dumps(with_checksum(r), separators=(",", ":"), sort_keys=False).encode() + b"\n"
                        for r in records)
        try:
            _append_whole(self.samples_path, data)
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFull(f"{self.samples_path}: cannot append: the disk is full") from exc
            raise StoreError(f"{self.samples_path}: cannot append ({exc.strerror})") from None

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
            self.set_aside(dst)
        os.replace(src, dst)
        return dst

    def set_aside(self, path: Path) -> Path:
        """Move ``path`` under raw/.aborted (kept, never deleted); returns where it went."""
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
            keep = incomplete_tail_start(data)
            if keep < len(data):
                torn = _cut_aside(self.samples_path, data, keep)
                done.append(f"cut the torn last sample ({len(data) - keep} bytes: a torn record and the records of "
                            f"its sample that survived) into {torn.name}; that sample runs again")
        recorded = self.completed()
        raw = self.path / "raw"
        for d in sorted(raw.iterdir()) if raw.exists() else []:
            if d.name == ".aborted" or not d.is_dir():
                continue
            sid = d.name.removeprefix(".partial-")
            if d.name.startswith(".partial-") or sid not in recorded:
                target = self.set_aside(d)
                done.append(f"moved unfinished raw output of {sid} to {target.relative_to(self.path)}")
        return done

    # ----------------------------------------------------------------- sessions

    def log_session(self, event: dict) -> None:
        """Append a line to sessions.jsonl (run started, resumed, finished, interrupted, failed).

        On a full disk the reserve (``hold_reserve``) is given back first, so the line still fits.
        """
        line = (json.dumps({"schema_version": SCHEMA_VERSION, "time": time.time(), **event}) + "\n").encode()
        path = self.path / "sessions.jsonl"
        try:
            _append_whole(path, line)
        except OSError as exc:
            if not is_disk_full(exc) or not self.release_reserve():
                raise
            _append_whole(path, line)

    @property
    def _reserve_path(self) -> Path:
        return self.path / ".session-reserve"

    def hold_reserve(self) -> None:
        """Set aside ``RESERVE_BYTES`` (allocated, not sparse) for the session's last line; best effort."""
        try:
            fd = os.open(self._reserve_path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            self._reserve_path.unlink(missing_ok=True)

    def release_reserve(self) -> bool:
        """Give the reserve back; whether there was one."""
        try:
            self._reserve_path.unlink()
        except FileNotFoundError:
            return False
        return True


def complete_samples(records: list[dict]) -> set[str]:
    """Sample ids with a record for each of their ``n_receivers`` receivers."""
    seen: dict[str, set[str]] = {}
    want: dict[str, int] = {}
    for i, r in enumerate(records):
        # Tolerant of malformed records (counted, not dropped): the dataset's validation names them.
        sid = r.get("sample_id")
        seen.setdefault(sid, set()).add(r.get("receiver", f"?{i}"))
        n = r.get("n_receivers")
        want[sid] = n if isinstance(n, int) and n >= 1 else 1
    return {sid for sid, rx in seen.items() if len(rx) >= want[sid]}


def incomplete_tail_start(data: bytes) -> int:
    """Where the torn end of ``samples.jsonl`` content starts (``len(data)`` when it is not torn).

    A sample's records are one append, so only the last sample can be torn: a last line
    without its newline, and with it the complete lines of the same sample before it.
    """
    if not data or data.endswith(b"\n"):
        return len(data)
    keep = data.rfind(b"\n") + 1
    lines = data[:keep].splitlines(keepends=True)
    try:
        recs = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return keep  # a corrupt middle line: records() reports it; cut only the torn bytes
    done = complete_samples(recs)
    while lines and recs[-1].get("sample_id") not in done:
        keep -= len(lines.pop())
        recs.pop()
    return keep


def _short(exc: Exception, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def _check_torn_record(data: bytes, source: str) -> None:
    """``StoreError`` unless ``data`` can be the start of a record cut short (UTF-8 text starting with ``{``)."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)  # a character cut short is fine
    except UnicodeDecodeError as exc:
        raise StoreError(f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {exc.start + 1}): not a "
                         "record; is it a binary file? (restore the campaign from a copy)") from None
    if not text.lstrip().startswith("{"):
        raise StoreError(f"{source}: {text[:40]!r}... is not the start of a record (restore the campaign from a "
                         "copy)")


def check_campaigns(paths: list[Path]) -> None:
    """Open every campaign among ``paths`` and read its records once: ``StoreError`` (exit 4) for a damaged or
    newer one. The commands that read campaigns call it before they import their heavy stacks (pandas,
    matplotlib), so that a damaged store is refused at once, whatever else they then do with it."""
    for p in paths:
        if is_campaign_dir(Path(p)):
            Campaign.open(p).torn_tail()


def is_campaign_dir(path: Path) -> bool:
    """Whether ``path`` holds a campaign's files (its manifest, or records or sessions without one)."""
    return any(os.path.lexists(path / name) for name in ("manifest.json", "samples.jsonl", "sessions.jsonl"))


def read_manifest(path: Path) -> dict:
    """``manifest.json`` as a dict; ``StoreError`` (exit 4) naming it and what is wrong otherwise (a directory,
    unreadable, larger than ``MAX_MANIFEST_BYTES``, not UTF-8, not JSON, not a JSON object, no campaign or plan)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise StoreError(f"{path}: missing (restore it from a copy)") from None
    except IsADirectoryError:
        raise StoreError(f"{path}: is a directory, not the campaign's manifest") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise StoreError(f"{path}: larger than {MAX_MANIFEST_BYTES // (1024 * 1024)} MiB: not a manifest "
                         "(restore it from a copy)")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): not a "
                         "manifest (restore it from a copy)") from None
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"{path}: not valid JSON ({_short(exc)})") from None
    if not isinstance(doc, dict):
        raise StoreError(f"{path}: a JSON {type(doc).__name__}, not an object: not a manifest (restore it from a "
                         "copy)")
    return doc


def _check_version(doc: dict, source: str, what: str) -> int:
    """``doc``'s schema_version; ``StoreError`` naming ``what`` (manifest, record) if missing or newer."""
    v = doc.get("schema_version")
    if not isinstance(v, int):
        raise StoreError(f"{source}: {what} without schema_version")
    if isinstance(v, bool) or v < 1:
        raise StoreError(f"{source}: {what} schema_version {v!r} is not a version (1..{SCHEMA_VERSION})")
    if v > SCHEMA_VERSION:
        raise StoreError(f"{source}: {what} schema_version {v} is newer than this mplab understands "
                         f"({SCHEMA_VERSION}); upgrade mplab")
    return v


def upgrade_manifest(doc: dict, source: str) -> dict:
    """Bring a manifest to the current schema; refuse newer ones, and one without a campaign id or plan."""
    _check_version(doc, source, "manifest")
    if not isinstance(doc.get("campaign"), str):
        raise StoreError(f"{source}: manifest without its campaign id (\"campaign\": a string)")
    plan = doc.get("plan")
    if not isinstance(plan, list) or not all(isinstance(sid, str) for sid in plan):
        raise StoreError(f"{source}: manifest without its plan (\"plan\": a list of sample ids)")
    for key in ("testbed", "scenario", "inventory"):
        if key in doc and not isinstance(doc[key], dict):
            raise StoreError(f"{source}: manifest's {key!r} is a JSON {type(doc[key]).__name__}, not an object")
    return doc


def upgrade_record(rec: dict, source: str) -> dict:
    """Bring a sample record to the current schema; refuse newer ones.

    Schema 1 -> 2: ``repairs`` were strings (which attempt they preceded was not kept) and there was no
    ``checksum`` (such a record cannot be verified, only checked against the plan).
    """
    v = _check_version(rec, source, "record")
    if v == 1:
        rec = dict(rec)
        rec["repairs"] = [{"attempt": None, "what": r} if isinstance(r, str) else r for r in rec.get("repairs") or []]
        rec.setdefault("checksum", None)
    return rec


def record_checksum(rec: dict) -> str:
    """``sha256:`` of a record without its ``checksum`` (keys sorted, compact JSON: independent of key order)."""
    body = {k: v for k, v in rec.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def with_checksum(rec: dict) -> dict:
    """The record as stored: its ``checksum`` set (last), over everything else."""
    body = {k: v for k, v in rec.items() if k != "checksum"}
    return {**body, "checksum": record_checksum(body)}


@dataclass(frozen=True)
class TornTail:
    """The end of samples.jsonl after its last line end: a write cut short by a crash, or junk appended.

    Left out by every reader, with the complete lines of its sample before it (``lines_before``); resume cuts
    it off into ``samples.jsonl.torn-<time>`` and runs that sample again.
    """

    line: int
    offset: int
    size: int
    junk: bool = False
    sample_id: str | None = None
    lines_before: int = 0

    def describe(self, path: Path) -> str:
        what = "NUL bytes or blanks (junk)" if self.junk else "a record cut short"
        also = (f"; with it {self.lines_before} complete line(s) of its sample {self.sample_id} are left out"
                if self.lines_before else "")
        return (f"{path}:{self.line}: torn tail: {self.size} byte(s) without a line end at offset {self.offset} "
                f"({what}){also}; `mplab run --resume` cuts it off and runs its sample again")


@dataclass(frozen=True)
class Damage:
    """A line of samples.jsonl that parses but cannot be trusted."""

    line: int
    sample_id: str | None
    reason: str

    def describe(self, path: Path) -> str:
        return f"{path}:{self.line}: {self.reason}"


def checksum_damage(stored: dict) -> str | None:
    """Why a record as stored fails its checksum (None when it passes, or is of schema 1, which has none)."""
    if stored.get("schema_version") == 1:
        return None
    checksum = stored.get("checksum")
    if checksum is None:
        return "no checksum (every record of schema 2 has one)"
    if checksum != record_checksum(stored):
        return "checksum mismatch: the record was changed after it was written"
    return None


def record_damage(rec: dict, campaign_id: str, plan: set[str]) -> str | None:
    """Why an (upgraded) record contradicts its campaign (None when it does not): a sample id the plan does
    not have, or that its case and index contradict, or another campaign's id. Schema-1 records, which have
    no checksum, get these checks only."""
    sid = rec.get("sample_id")
    if plan and sid not in plan:
        return f"sample_id {sid!r} is not in the campaign's plan"
    if rec.get("campaign") not in (None, campaign_id):
        return f"campaign {rec.get('campaign')!r} is not this campaign ({campaign_id})"
    case, index = rec.get("case_id"), rec.get("sample_index")
    if isinstance(case, str) and isinstance(index, int) and sid != f"{case}-s{index:03d}":
        return f"sample_id {sid!r} contradicts its case_id {case!r} and sample_index {index}"
    return None
