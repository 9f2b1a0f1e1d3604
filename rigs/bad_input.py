"""The bad-input corpus: kinds of bad input, each with the exit code and words its refusal must have.

Each ``Case`` makes its input in a scratch directory and names the `mplab` arguments that read it;
``run_case`` runs the real command line there (``python -m mplab``, cwd = the scratch directory) and
measures what a user would see: the exit code, the first line of the message, wall seconds, the
process's peak resident memory (``wait4``'s ``ru_maxrss``, through a small launcher: see ``_LAUNCHER``),
CPU seconds, and every file created or
changed in the scratch directory. ``Outcome.failures`` says what a case got wrong: a wrong code, a
message without its words, a traceback, something created, or a blow-up (more than ``MAX_SECONDS``
or ``MAX_MB``).

Used by tests/faults/test_bad_input_corpus.py (every case, nothing created, code and words) and
bench/bad_inputs.py (the table: code, first line, seconds, peak MB, files created).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "inventory" / "emulated.yaml"

#: The bounds of a refusal: within 2 s and 200 MB.
MAX_SECONDS = 2.0
MAX_MB = 200.0

#: A scenario that plans (`run --dry-run`) on the emulated inventory: the base every scenario case edits.
QUICK = {"name": "q", "inventory": str(INVENTORY), "congestion_controls": ["cubic"], "receiver_counts": [1],
         "modes": ["wifi"], "samples_per_case": 1, "file_size": "1M"}


@dataclass(frozen=True)
class Case:
    """One kind of bad input: ``make(dir)`` writes its files and returns `mplab`'s arguments."""

    kind: str
    make: Callable[[Path], list[str]]
    code: int
    says: tuple[str, ...]  # each must be in stdout + stderr (case-insensitive)
    #: created or changed paths a refusal may leave (relative to the scratch directory); none by default
    may_create: tuple[str, ...] = ()
    #: False for a case that is not refused but does its work and says what it left out (not held to 2 s / 200 MB)
    refusal: bool = True


@dataclass
class Outcome:
    """What one run of a case did."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    cpu_s: float
    peak_mb: float
    created: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        for line in (self.stderr + "\n" + self.stdout).splitlines():
            if line.strip() and not line.startswith(("Usage:", "Try ")):
                return line.strip()
        return ""

    def failures(self, case: Case, *, bounds: bool = True) -> list[str]:
        """What the case got wrong (empty: refused as it should be)."""
        out = []
        text = " ".join((self.stdout + " " + self.stderr).lower().split())  # rich wraps long lines
        if self.code != case.code:
            out.append(f"exit {self.code}, expected {case.code}")
        missing = [w for w in case.says if w.lower() not in text]
        if missing:
            out.append(f"message lacks {missing}")
        if "traceback" in text:
            out.append("traceback")
        if self.created:
            out.append(f"created {self.created[:5]}")
        if bounds and case.refusal and self.seconds > MAX_SECONDS:
            out.append(f"{self.seconds:.1f} s")
        if bounds and case.refusal and self.peak_mb > MAX_MB:
            out.append(f"{self.peak_mb:.0f} MB")
        return out


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            snap[str(p.relative_to(root))] = (st.st_size if not p.is_dir() else 0, st.st_mtime_ns)
    return snap


#: Runs the command as its own child and reports that child's exit code, CPU time and peak memory on a pipe.
#: A process started straight from this one (a pytest worker with PyTorch loaded: 800+ MB) would report this
#: process's resident pages as its peak (Linux keeps the old image's high-water mark across exec); the
#: launcher is a fresh, small interpreter, so its child's peak is the command's own.
_LAUNCHER = """
import json, os, sys
fd, argv = int(sys.argv[1]), sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execv(argv[0], argv)
_, status, ru = os.wait4(pid, 0)
os.write(fd, json.dumps([os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, ru.ru_maxrss]).encode())
"""


def run_case(case: Case, scratch: Path, timeout: float = 120.0) -> Outcome:
    """Make the case's input under ``scratch`` and run `mplab` on it there."""
    scratch.mkdir(parents=True, exist_ok=True)
    args = case.make(scratch)
    before = _snapshot(scratch)
    out, err = scratch.parent / f".{scratch.name}.out", scratch.parent / f".{scratch.name}.err"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MPLAB_LOG")}
    env["COLUMNS"] = "200"
    start = time.monotonic()
    report_r, report_w = os.pipe()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(report_w), sys.executable, "-m", "mplab", *args],
                                cwd=scratch, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, pass_fds=(report_w,))
        os.close(report_w)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, outer = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        with os.fdopen(report_r, "rb") as r:
            report = r.read()
    seconds = time.monotonic() - start
    if report:  # the command's own exit code, CPU time and peak memory, from the launcher's wait4
        code, cpu_s, maxrss_kb = json.loads(report)
    else:       # killed at the deadline with its launcher: what the launcher's own status says
        code, cpu_s, maxrss_kb = os.waitstatus_to_exitcode(status), outer.ru_utime + outer.ru_stime, outer.ru_maxrss
    proc.returncode = code
    after = _snapshot(scratch)
    created = sorted(p for p, st in after.items() if before.get(p) != st and not p.startswith(case.may_create or
                                                                                               ("\0",)))
    created = [p for p in created if not any(p == m or p.startswith(m + "/") for m in case.may_create)]
    o = Outcome(proc.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"), seconds,
                cpu_s, maxrss_kb / 1024, created)
    out.unlink()
    err.unlink()
    return o


# --------------------------------------------------------------------------- scenarios and inventories

def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def scenario_case(kind: str, edit: dict | str | bytes, says: tuple[str, ...] | str, code: int = 2) -> Case:
    """A scenario (QUICK with ``edit`` merged in, or the text ``edit``) given to `run --dry-run`."""

    def make(d: Path) -> list[str]:
        text = edit if isinstance(edit, (str, bytes)) else yaml.safe_dump(
            {k: v for k, v in {**QUICK, **edit}.items() if v is not None}, sort_keys=False)
        p = _write(d / "s.yaml", text)
        return ["run", str(p), "--dry-run", "--runs-dir", str(d / "runs")]

    return Case(f"scenario: {kind}", make, code, (says,) if isinstance(says, str) else says)


def inventory_doc() -> dict:
    return yaml.safe_load(INVENTORY.read_text())


def inventory_case(kind: str, edit: Callable[[dict], object] | str, says: tuple[str, ...] | str,
                   code: int = 2) -> Case:
    """The emulated inventory changed by ``edit`` (or the text ``edit``), named by a scenario, `run --dry-run`."""

    def make(d: Path) -> list[str]:
        if isinstance(edit, str):
            text = edit
        else:
            doc = inventory_doc()
            edit(doc)
            text = yaml.safe_dump(doc, sort_keys=False)
        inv = _write(d / "inv.yaml", text)
        s = _write(d / "s.yaml", yaml.safe_dump({**QUICK, "inventory": str(inv)}, sort_keys=False))
        return ["run", str(s), "--dry-run", "--runs-dir", str(d / "runs")]

    return Case(f"inventory: {kind}", make, code, (says,) if isinstance(says, str) else says)


def alias_bomb(levels: int = 9) -> str:
    """"Billion laughs": nine lists of nine aliases of the previous one (9^levels values once expanded)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- campaign stores

def good_campaign(d: Path, samples: int = 3) -> Path:
    """A small sound campaign under ``d/runs/c1`` (synthetic records, as the runner writes them)."""
    from harness.campaign.store import Campaign
    from rigs.synthetic import synthetic_records

    recs = synthetic_records("c1", ccs=("cubic",), counts=(1,), modes=("wifi",), samples=samples, file_bytes=1_000_000)
    inv = inventory_doc()
    c = Campaign.create(d / "runs", "c1", {"testbed": {"kind": "synthetic"}, "plan": sorted({r["sample_id"]
                                                                                             for r in recs}),
                                           "scenario": {**QUICK, "samples_per_case": samples}, "inventory": inv})
    for r in recs:
        c.append([r])
    c.log_session({"event": "start", "pending": samples, "pid": 1})
    c.log_session({"event": "finished", "samples_run": samples})
    return c.path


READERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "status": lambda d, c: ["status", str(c)],
    "run --resume": lambda d, c: ["run", "--resume", str(c)],
    "dataset build": lambda d, c: ["dataset", "build", str(c), "-o", str(d / "ds")],
    "report": lambda d, c: ["report", str(c), "-o", str(d / "rep")],
    "watch": lambda d, c: ["watch", str(c), "--port", "0"],
}


def _set_manifest(c: Path, value: object) -> None:
    (c / "manifest.json").write_text(value if isinstance(value, str) else json.dumps(value))


def _manifest_edit(**kw: object) -> Callable[[Path], None]:
    def damage(c: Path) -> None:
        doc = json.loads((c / "manifest.json").read_text())
        for k, v in kw.items():
            if v is None:
                doc.pop(k, None)
            else:
                doc[k] = v
        _set_manifest(c, doc)

    return damage


def _samples_dir(c: Path) -> None:
    (c / "samples.jsonl").unlink()
    (c / "samples.jsonl").mkdir()


def _samples_bytes(data: bytes, append: bool = False) -> Callable[[Path], None]:
    def damage(c: Path) -> None:
        with open(c / "samples.jsonl", "ab" if append else "wb") as f:
            f.write(data)

    return damage


def _middle_line(text: bytes) -> Callable[[Path], None]:
    def damage(c: Path) -> None:
        lines = (c / "samples.jsonl").read_bytes().splitlines(keepends=True)
        lines[1] = text
        (c / "samples.jsonl").write_bytes(b"".join(lines))

    return damage


def _record_edit(line: int, **kw: object) -> Callable[[Path], None]:
    def damage(c: Path) -> None:
        lines = (c / "samples.jsonl").read_bytes().splitlines(keepends=True)
        rec = json.loads(lines[line])
        rec.update(kw)
        lines[line] = json.dumps(rec).encode() + b"\n"
        (c / "samples.jsonl").write_bytes(b"".join(lines))

    return damage


def _torn(c: Path) -> None:
    data = (c / "samples.jsonl").read_bytes()
    (c / "samples.jsonl").write_bytes(data[:-40])


def _sparse_manifest(c: Path) -> None:
    with open(c / "manifest.json", "wb") as f:
        f.truncate(65 * 1024 * 1024)


def _dangling_samples(c: Path) -> None:
    (c / "samples.jsonl").unlink()
    (c / "samples.jsonl").symlink_to(c / "nowhere.jsonl")


def _manifest_dir(c: Path) -> None:
    (c / "manifest.json").unlink()
    (c / "manifest.json").mkdir()


#: Damage that makes a store unusable: every reader exits 4 naming the file and what is wrong.
STORE_DAMAGE: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    ("manifest is a JSON list", lambda c: _set_manifest(c, [1, 2]), ("manifest.json", "not an object")),
    ("manifest is a JSON string", lambda c: _set_manifest(c, '"x"'), ("manifest.json", "not an object")),
    ("manifest is not JSON", lambda c: _set_manifest(c, "{plan: ["), ("manifest.json", "not valid JSON")),
    ("manifest is empty", lambda c: _set_manifest(c, ""), ("manifest.json", "not valid JSON")),
    ("manifest is binary", lambda c: (c / "manifest.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" * 50),
     ("manifest.json", "not UTF-8")),
    ("manifest nested 100,000 deep", lambda c: _set_manifest(c, "[" * 100_000 + "]" * 100_000),
     ("manifest.json", "not valid JSON")),
    ("manifest is missing", lambda c: (c / "manifest.json").unlink(), ("manifest.json",)),
    ("manifest is a directory", _manifest_dir, ("manifest.json", "directory")),
    ("manifest of 65 MiB", _sparse_manifest, ("manifest.json", "larger than")),
    ("manifest schema_version 99", _manifest_edit(schema_version=99), ("manifest.json", "newer")),
    ("manifest schema_version '2'", _manifest_edit(schema_version="2"), ("manifest.json", "schema_version")),
    ("manifest schema_version 0", _manifest_edit(schema_version=0), ("manifest.json", "schema_version")),
    ("manifest without schema_version", _manifest_edit(schema_version=None), ("manifest.json", "schema_version")),
    ("manifest without plan", _manifest_edit(plan=None), ("manifest.json", "plan")),
    ("manifest plan of numbers", _manifest_edit(plan=[1, 2]), ("manifest.json", "plan")),
    ("manifest without campaign id", _manifest_edit(campaign=None), ("manifest.json", "campaign id")),
    ("manifest testbed is a list", _manifest_edit(testbed=["x"]), ("manifest.json", "testbed")),
    ("samples.jsonl is a directory", _samples_dir, ("samples.jsonl", "directory")),
    ("samples.jsonl is a dangling link", _dangling_samples, ("samples.jsonl",)),
    ("samples.jsonl is binary", _samples_bytes(bytes(range(256)) * 64), ("samples.jsonl:1", "corrupt record")),
    ("samples.jsonl is binary with line ends", _samples_bytes((b"\xff\xd8\xff\xe0" * 50 + b"\n") * 20),
     ("samples.jsonl", "not UTF-8")),
    ("samples.jsonl has a 2 MiB line", _samples_bytes(b"{" + b"x" * (2 * 1024 * 1024) + b"\n", append=True),
     ("samples.jsonl", "longer than")),
    ("samples.jsonl middle line not JSON", _middle_line(b"{not json\n"), ("samples.jsonl:2", "corrupt record")),
    ("samples.jsonl record schema_version 99", _record_edit(1, schema_version=99), ("samples.jsonl:2", "newer")),
    ("samples.jsonl text junk after the last line", _samples_bytes(b"hello world", append=True),
     ("samples.jsonl", "not the start of a record")),
    ("makeup.jsonl line not JSON", lambda c: _write(c / "makeup.jsonl", "{oops\n"),
     ("makeup.jsonl:1", "not a line of samples added")),
    ("makeup.jsonl names a sample of no case", lambda c: _write(c / "makeup.jsonl", '{"samples": ["x-n1-wifi-s003"]}\n'),
     ("makeup.jsonl:1", "of a case of the campaign's plan")),
    ("makeup.jsonl is a directory", lambda c: (c / "makeup.jsonl").mkdir(), ("makeup.jsonl", "cannot be read")),
]

#: Damage a reader works around but must report: status says it (0), dataset build refuses (4) unless
#: --skip-damaged (then counts it), report leaves it out and says so (0); resume repairs it.
STORE_PARTIAL: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    ("torn tail", _torn, ("torn tail", "a record cut short")),
    ("4 KiB of NUL bytes appended", _samples_bytes(b"\0" * 4096, append=True), ("torn tail", "junk")),
    ("a record whose checksum does not match", _record_edit(1, energy_j=1.0), ("checksum mismatch",)),
]
_PARTIAL_CODE = {"status": 0, "dataset build": 4, "report": 0}


def _store_case(kind: str, reader: str, damage: Callable[[Path], None], code: int, says: tuple[str, ...],
                may_create: tuple[str, ...] = ()) -> Case:
    def make(d: Path) -> list[str]:
        c = good_campaign(d)
        damage(c)
        return READERS[reader](d, c)

    return Case(f"store ({reader}): {kind}", make, code, says, may_create, refusal=code != 0)


def store_cases() -> list[Case]:
    out = [_store_case(k, r, dmg, 4, says) for k, dmg, says in STORE_DAMAGE for r in READERS if r != "watch"]
    # `mplab watch` reads the manifest with the same reader (it tails samples.jsonl live: a campaign being
    # written may end in a line cut short for a moment, so its record damage is not watch's to refuse).
    out += [_store_case(k, "watch", dmg, 4, says) for k, dmg, says in STORE_DAMAGE if k.startswith("manifest")]
    for k, dmg, says in STORE_PARTIAL:
        for r, code in _PARTIAL_CODE.items():
            # report draws its page from what it could read (created, as asked): the case is that it says so.
            out.append(_store_case(k, r, dmg, code, says if r != "report" else ("left out",) + says[-1:],
                                   may_create=("rep",) if r == "report" else ()))

    def skip(d: Path) -> list[str]:
        c = good_campaign(d)
        _torn(c)
        return ["dataset", "build", str(c), "-o", str(d / "ds"), "--skip-damaged", "--train", "1", "--test", "1"]

    out.append(Case("store (dataset build --skip-damaged): torn tail", skip, 0, ("excluded", "torn tail"),
                    may_create=("ds",), refusal=False))
    return out


# --------------------------------------------------------------------------- the corpus

def config_cases() -> list[Case]:
    """Bad scenarios and inventories (`run --dry-run`): exit 2 naming the file, field and reason."""
    s = scenario_case
    cases = [
        s("alias bomb", yaml.safe_dump(QUICK) + alias_bomb(), ("s.yaml", "aliases")),
        s("alias that contains itself", yaml.safe_dump(QUICK) + "x: &x [*x]\n", ("s.yaml", "contains itself")),
        s("a 70,000-character line", yaml.safe_dump(QUICK) + "# " + "x" * 70_000 + "\n", ("s.yaml", "characters long")),
        s("not UTF-8", yaml.safe_dump(QUICK).replace("name: q", "name: \xe9").encode("latin-1"), ("s.yaml", "not UTF-8")),
        s("not YAML", "name: [q\n", ("s.yaml", "not valid YAML")),
        s("a list at the top", "- 1\n- 2\n", ("s.yaml", "mapping")),
        s("empty file", "", ("s.yaml", "mapping")),
        s("key given twice", yaml.safe_dump(QUICK) + "name: r\n", ("s.yaml", "given twice")),
        s("unknown field", {"sample_per_case": 3}, ("sample_per_case", "unknown field")),
        s("samples_per_case true", {"samples_per_case": True}, ("samples_per_case", "true/false")),
        s("samples_per_case 0", {"samples_per_case": 0}, ("samples_per_case",)),
        s("samples_per_case 10^7", {"samples_per_case": 10_000_000}, ("samples_per_case", "100000")),
        s("samples_per_case a string", {"samples_per_case": "three"}, ("samples_per_case",)),
        s("transfer_timeout_s .inf", yaml.safe_dump(QUICK) + "transfer_timeout_s: .inf\n",
          ("transfer_timeout_s", "finite")),
        s("transfer_timeout_s .nan", yaml.safe_dump(QUICK) + "transfer_timeout_s: .nan\n",
          ("transfer_timeout_s", "finite")),
        s("transfer_timeout_s negative", {"transfer_timeout_s": -1}, ("transfer_timeout_s",)),
        s("settle_s 1e300", {"settle_s": 1e300}, ("settle_s",)),
        s("settle_s negative", {"settle_s": -1}, ("settle_s",)),
        s("seed negative", {"seed": -1}, ("seed",)),
        s("file_size 200G", {"file_size": "200G"}, ("file_size", "100 GiB")),
        s("file_size 400 digits", {"file_size": "9" * 400}, ("file_size",)),
        s("file_size 0", {"file_size": 0}, ("file_size",)),
        s("file_size nonsense", {"file_size": "lots"}, ("file_size",)),
        s("receiver_counts [true]", {"receiver_counts": [True]}, ("receiver_counts", "true/false")),
        s("receiver_counts [0]", {"receiver_counts": [0]}, ("receiver_counts",)),
        s("receiver_counts beyond the inventory", {"receiver_counts": [50]}, ("receiver",)),
        s("receiver_counts empty", {"receiver_counts": []}, ("receiver_counts",)),
        s("modes [5g]", {"modes": ["5g"]}, ("modes",)),
        s("modes empty", {"modes": []}, ("modes",)),
        s("congestion_controls [bbr9]", {"congestion_controls": ["bbr9"]}, ("congestion_controls",)),
        s("congestion_controls empty", {"congestion_controls": []}, ("congestion_controls",)),
        s("congestion_controls a string", {"congestion_controls": "cubic"}, ("congestion_controls",)),
        s("name of 10,000 characters", {"name": "x" * 10_000}, ("name",)),
        s("name with a slash", {"name": "a/b"}, ("name",)),
        s("name empty", {"name": ""}, ("name",)),
        s("name missing", {"name": None}, ("name",)),
        s("inventory ''", {"inventory": ""}, ("inventory",)),
        s("inventory missing file", {"inventory": "/nonexistent/inv.yaml"}, ("inv.yaml", "not found")),
        s("inventory is a directory", {"inventory": "/"}, ("directory",)),
        s("inventory a number", {"inventory": 5}, ("inventory",)),
        s("schema_version 99", {"schema_version": 99}, ("schema_version",)),
        s("a plan of 9,000,000 samples", {"congestion_controls": ["cubic", "reno", "lia", "olia", "balia", "wvegas"],
                                          "receiver_counts": [1, 2, 3, 4, 5], "modes": ["wifi", "lte", "both"],
                                          "samples_per_case": 100_000}, ("9,000,000 samples",)),
        s("nested 5000 deep", "a: " + "[" * 5000 + "]" * 5000 + "\n", ("s.yaml", "nested too deeply")),
        s("retries 11", {"retries": 11}, ("retries",)),
        s("retries -1", {"retries": -1}, ("retries",)),
        s("speedup 0", {"speedup": 0}, ("speedup",)),
        s("speedup 100", {"speedup": 100}, ("speedup",)),
        s("idle_tolerance_w negative", {"idle_tolerance_w": -1}, ("idle_tolerance_w",)),
        s("idle_timeout_s 0", {"idle_timeout_s": 0}, ("idle_timeout_s",)),
        s("description of 20,000 characters", {"description": "d" * 20_000}, ("description",)),
        s("receiver_selection random", {"receiver_selection": "random"}, ("receiver_selection",)),
        s("shuffle 'maybe'", {"shuffle": "maybe"}, ("shuffle",)),
        s("seed 2^63", {"seed": 2**63}, ("seed",)),
        s("unknown policy", {"modes": [], "policies": ["nosuchpolicy"]}, ("polic",)),
        s("receiver_counts 101 entries", {"receiver_counts": list(range(1, 102))}, ("receiver_counts",)),
    ]
    i = inventory_case
    cases += [
        i("alias bomb", INVENTORY.read_text() + alias_bomb(), ("inv.yaml", "aliases")),
        i("not YAML", "receivers: [\n", ("inv.yaml", "not valid YAML")),
        i("empty", "", ("inv.yaml", "mapping")),
        i("unknown top-level field", lambda d: d.update(recievers=[]), ("recievers", "unknown field")),
        i("WiFi and LTE both wlan0", lambda d: _iface(d, "lte", "wlan0"), ("interfaces", "'wlan0'", "wifi and lte")),
        i("interface name of 16 characters", lambda d: _iface(d, "wifi", "w" * 16), ("interfaces.wifi.name",)),
        i("interface name '.'", lambda d: _iface(d, "wifi", "."), ("interfaces", "kernel refuses")),
        i("interface name '..'", lambda d: _iface(d, "lte", ".."), ("interfaces", "kernel refuses")),
        i("interface name lo", lambda d: _iface(d, "wifi", "lo"), ("interfaces", "'lo'")),
        i("interface name with a space", lambda d: _iface(d, "wifi", "wl an0"), ("interfaces.wifi.name",)),
        i("interface name with a slash", lambda d: _iface(d, "wifi", "wl/an0"), ("interfaces.wifi.name",)),
        i("interface name with a colon", lambda d: _iface(d, "lte", "lte:0"), ("interfaces.lte.name",)),
        i("interface name empty", lambda d: _iface(d, "lte", ""), ("interfaces.lte.name",)),
        i("namespace_prefix mplab-flt (no trailing dash)", lambda d: _prefix(d, "mplab-flt"),
          ("namespace_prefix", "must end in '-'")),
        i("namespace_prefix mplab-a--", lambda d: _prefix(d, "mplab-a--"), ("namespace_prefix", "'--'")),
        i("namespace_prefix without mplab-", lambda d: _prefix(d, "lab-"), ("namespace_prefix",)),
        i("namespace_prefix in capitals", lambda d: _prefix(d, "mplab-FLT-"), ("namespace_prefix",)),
        i("namespace_prefix of 40 characters", lambda d: _prefix(d, "mplab-" + "a" * 33 + "-"), ("namespace_prefix",)),
        i("300 receivers", _many_receivers, ("300 receivers", "at most 254")),
        i("receiver name with a dash", lambda d: d["receivers"][0].update(name="n-1"), ("receivers[0].name",)),
        i("receiver name of 16 characters", lambda d: d["receivers"][0].update(name="n" * 16), ("receivers[0].name",)),
        i("receiver names repeated", lambda d: d["receivers"][1].update(name="n1"), ("unique", "n1")),
        i("sender named as a receiver", lambda d: d["sender"].update(name="n1"), ("sender name",)),
        i("sender address not an address", lambda d: d["sender"].update(address="10.0.0.300"), ("sender.address",)),
        i("no receivers", lambda d: d.update(receivers=[]), ("receivers",)),
        i("receiver without lte", lambda d: d["receivers"][0]["interfaces"].pop("lte"), ("missing interface",)),
        i("a third radio", lambda d: d["receivers"][0]["interfaces"].update(g5={"name": "x0"}), ("interfaces",)),
        i("channel rate 0", lambda d: d["receivers"][0]["interfaces"]["wifi"]["channel"].update(rate_mbit=0),
          ("rate_mbit",)),
        i("channel rate .inf", lambda d: d["receivers"][0]["interfaces"]["wifi"]["channel"].update(
            rate_mbit=float("inf")), ("rate_mbit", "finite")),
        i("channel rate true", lambda d: d["receivers"][0]["interfaces"]["wifi"]["channel"].update(rate_mbit=True),
          ("rate_mbit", "true/false")),
        i("no channel on the emulated testbed", lambda d: d["receivers"][0]["interfaces"]["wifi"].pop("channel"),
          ("channel",)),
        i("meter kind um25c on the emulated testbed", lambda d: d["receivers"][0]["meter"].update(kind="um25c"),
          ("receivers[0].meter",)),
        i("unknown kind", lambda d: d.update(kind="quantum"), ("unknown testbed kind",)),
        i("schema_version 2", lambda d: d.update(schema_version=2), ("schema_version",)),
        i("no emulation section", lambda d: d.pop("emulation"), ("emulation",)),
        i("base_w negative", lambda d: d["emulation"]["power_profile"].update(base_w=-1), ("base_w",)),
        i("coexistence_factor 0", lambda d: d["emulation"].update(coexistence_factor=0), ("coexistence_factor",)),
        i("coexistence_factor 2", lambda d: d["emulation"].update(coexistence_factor=2), ("coexistence_factor",)),
        i("AP capacity negative", lambda d: d["emulation"]["wifi_ap"].update(capacity_mbit=-5), ("capacity_mbit",)),
        i("name missing", lambda d: d.pop("name"), ("name", "Field required")),
        i("a list at the top", "- 1\n", ("inv.yaml", "mapping")),
    ]
    return cases


def _iface(doc: dict, radio: str, name: str) -> None:
    doc["receivers"][0]["interfaces"][radio]["name"] = name


def _prefix(doc: dict, prefix: str) -> None:
    doc["emulation"]["namespace_prefix"] = prefix


def _many_receivers(doc: dict, n: int = 300) -> None:
    first = doc["receivers"][0]
    doc["receivers"] = [{**first, "name": f"n{i}"} for i in range(1, n + 1)]


def _argv_case(kind: str, argv: Callable[[Path], list[str]], code: int, says: tuple[str, ...] | str) -> Case:
    return Case(kind, argv, code, (says,) if isinstance(says, str) else says)


def _fake_dataset(d: Path) -> Path:
    _write(d / "ds" / "dataset.json", "{}")
    return d / "ds"


QUICK_SCENARIO = str(REPO / "scenarios" / "quick.yaml")


def argument_cases() -> list[Case]:
    """Bad arguments and options: refused before any heavy import (PyTorch, Ray, MLflow) or anything created."""
    a = _argv_case

    def train(*extra: str, dataset: Callable[[Path], Path] = _fake_dataset) -> Callable[[Path], list[str]]:
        return lambda d: ["train", str(dataset(d)), "-o", str(d / "m"), *extra]

    def run(*extra: str) -> Callable[[Path], list[str]]:
        return lambda d: ["run", QUICK_SCENARIO, "--runs-dir", str(d / "runs"), *extra]

    def file_at(name: str) -> Callable[[Path], Path]:
        return lambda d: _write(d / name, "x")

    cases = [
        a("run: --make-up without --resume", run("--make-up"), 2, ("--make-up", "--resume")),
        a("train: dataset missing", train(dataset=lambda d: d / "gen" / "nope"), 2, ("DATASET", "not found")),
        a("train: dataset is a file", train(dataset=file_at("f.csv")), 2, ("DATASET", "not a directory")),
        a("train: dataset without dataset.json", train(dataset=lambda d: d), 2, ("DATASET", "no dataset.json")),
        a("train: --lr nan", train("--lr", "nan"), 2, ("--lr",)),
        a("train: --lr inf", train("--lr", "inf"), 2, ("--lr",)),
        a("train: --lr 0", train("--lr", "0"), 2, ("--lr",)),
        a("train: --lr -1", train("--lr", "-1"), 2, ("--lr",)),
        a("train: --lr 1e9", train("--lr", "1e9"), 2, ("--lr",)),
        a("train: --lr abc", train("--lr", "abc"), 2, ("--lr",)),
        a("train: --val-fraction 2", train("--val-fraction", "2"), 2, ("--val-fraction",)),
        a("train: --val-fraction 0", train("--val-fraction", "0"), 2, ("--val-fraction",)),
        a("train: --val-fraction 1", train("--val-fraction", "1"), 2, ("--val-fraction",)),
        a("train: --val-fraction nan", train("--val-fraction", "nan"), 2, ("--val-fraction",)),
        a("train: --epochs 0", train("--epochs", "0"), 2, ("--epochs",)),
        a("train: --patience 0", train("--patience", "0"), 2, ("--patience",)),
        a("train: --batch-size 0", train("--batch-size", "0"), 2, ("--batch-size",)),
        a("train: --seed -1", train("--seed", "-1"), 2, ("--seed",)),
        a("train: --precision fp8", train("--precision", "fp8"), 2, ("--precision",)),
        a("train: --force and --keep-previous", train("--force", "--keep-previous"), 2, ("--force",)),
        a("train: -o is a file", lambda d: ["train", str(_fake_dataset(d)), "-o", str(_write(d / "m", "x"))], 2,
          ("--out", "is a file")),
        a("train: -o holds a model", lambda d: ["train", str(_fake_dataset(d)), "-o",
                                                str(_write(d / "m" / "model.json", "{}").parent)], 2,
          ("already holds a model",)),
        a("models promote: version abc", lambda d: ["models", "promote", "nope", "abc"], 2, ("VERSION", "'abc'")),
        a("models promote: version 0", lambda d: ["models", "promote", "nope", "0"], 2, ("VERSION",)),
        a("models promote: no store here", lambda d: ["models", "promote", "nope", "1"], 2,
          ("no MLflow store", "mlflow.db")),
        a("models promote: alias with a space", lambda d: ["models", "promote", "nope", "1", "--alias", "a b"], 2,
          ("--alias",)),
        a("models promote: alias latest", lambda d: ["models", "promote", "nope", "1", "--alias", "latest"], 2,
          ("--alias",)),
        a("run: --watch-port 70000", run("--watch", "--watch-port", "70000"), 2, ("--watch-port",)),
        a("run: --watch-port 0", run("--watch", "--watch-port", "0"), 2, ("--watch-port",)),
        a("run: --runs-dir /proc/mplab", lambda d: ["run", QUICK_SCENARIO, "--runs-dir", "/proc/mplab"], 4,
          ("/proc/mplab", "cannot write")),
        a("run: --runs-dir is a file", lambda d: ["run", QUICK_SCENARIO, "--runs-dir", str(_write(d / "rf", "x"))],
          4, ("rf", "cannot write")),
        a("run: --cluster nohost:1", run("--cluster", "nohost:1"), 1, ("nohost", "cannot resolve")),
        a("run: --cluster 127.0.0.1:1", run("--cluster", "127.0.0.1:1"), 1, ("127.0.0.1:1", "does not answer")),
        a("run: --cluster nohost", run("--cluster", "nohost"), 2, ("--cluster", "not a cluster address")),
        a("run: --cluster host:99999", run("--cluster", "host:99999"), 2, ("--cluster", "not a cluster address")),
        a("run: --cluster with --testbeds 2", run("--cluster", "127.0.0.1:1", "--testbeds", "2"), 2, ("--cluster",)),
        a("run: --id ../x", run("--id", "../x"), 2, ("--id", "not a campaign id")),
        a("run: --id of 200 characters", run("--id", "x" * 200), 2, ("--id", "not a campaign id")),
        a("run: --testbeds 0", run("--testbeds", "0", "--dry-run"), 2, ("--testbeds",)),
        a("run: --testbeds 65", run("--testbeds", "65", "--dry-run"), 2, ("--testbeds",)),
        a("run: --shard-size 0", run("--shard-size", "0", "--dry-run"), 2, ("--shard-size",)),
        a("run: no scenario and no --resume", lambda d: ["run", "--runs-dir", str(d / "runs")], 2, ("scenario",)),
        a("run: scenario missing", lambda d: ["run", str(d / "none.yaml"), "--dry-run"], 2,
          ("none.yaml", "not found")),
        a("run: scenario is a directory", lambda d: ["run", str(d), "--dry-run"], 2, ("directory",)),
        a("run: --inventory missing", run("--inventory", "/nonexistent.yaml", "--dry-run"), 2,
          ("nonexistent.yaml", "not found")),
        a("run: --resume of a directory that is no campaign", lambda d: ["run", "--resume", str(d)], 2,
          ("not a campaign directory",)),
        a("run: --resume missing", lambda d: ["run", "--resume", str(d / "nope")], 2, ("nope",)),
        a("status: missing directory", lambda d: ["status", str(d / "nope")], 2, ("nope",)),
        a("status: a file", lambda d: ["status", str(_write(d / "f", "x"))], 2, ("not a campaign",)),
        a("dataset build: missing directory", lambda d: ["dataset", "build", str(d / "nope"), "-o", str(d / "ds")],
          2, ("nope",)),
        a("dataset build: --train 0", lambda d: ["dataset", "build", str(good_campaign(d)), "-o", str(d / "ds"),
                                                 "--train", "0"], 2, ("train",)),
        a("report: missing directory", lambda d: ["report", str(d / "nope"), "-o", str(d / "rep")], 2,
          ("nope", "neither a campaign")),
        a("report: --ci nonsense", lambda d: ["report", str(good_campaign(d)), "-o", str(d / "rep"), "--ci", "x"], 2,
          ("--ci",)),
        a("usage: unknown option", lambda d: ["--bogus"], 2, ("No such option",)),
        a("usage: unknown command", lambda d: ["nosuchcommand"], 2, ("No such command",)),
        a("usage: status without its argument", lambda d: ["status"], 2, ("Missing argument",)),
        a("usage: --testbeds abc", lambda d: ["run", QUICK_SCENARIO, "--testbeds", "abc"], 2, ("--testbeds",)),
        a("run: --speedup 0", run("--speedup", "0", "--dry-run"), 2, ("speedup",)),
        a("run: --speedup abc", run("--speedup", "abc", "--dry-run"), 2, ("speedup",)),
        a("watch: missing directory", lambda d: ["watch", str(d / "nope")], 2, ("nope",)),
        a("watch: --port 70000", lambda d: ["watch", str(good_campaign(d)), "--port", "70000"], 2, ("port",)),
        a("clean: --prefix without mplab-", lambda d: ["clean", "--prefix", "lab-"], 2, ("prefix", "mplab-")),
        a("clean: --prefix mplab-flt (no trailing dash)", lambda d: ["clean", "--prefix", "mplab-flt"], 2,
          ("prefix", "end in '-'")),
        a("dataset build: -o is a file", lambda d: ["dataset", "build", str(good_campaign(d)), "-o",
                                                    str(_write(d / "dsf", "x"))], 2, ("--out", "is a file")),
        a("dataset build: --version 1.0", lambda d: ["dataset", "build", str(good_campaign(d)), "-o", str(d / "ds"),
                                                     "--version", "1.0"], 2, ("version",)),
        a("dataset build: the same campaign twice", lambda d: ["dataset", "build", str(good_campaign(d)),
                                                               str(d / "runs" / "c1"), "-o", str(d / "ds")], 2,
          ("twice",)),
        a("report: -o is a file", lambda d: ["report", str(good_campaign(d)), "-o", str(_write(d / "rf", "x"))], 2,
          ("--out", "is a file")),
        a("report: the same campaign twice", lambda d: ["report", str(good_campaign(d)), str(d / "runs" / "c1"),
                                                        "-o", str(d / "rep")], 2, ("twice",)),
    ]
    return cases


def corpus() -> list[Case]:
    """Every case, in a stable order (kinds are unique)."""
    cases = config_cases() + store_cases() + argument_cases()
    kinds = [c.kind for c in cases]
    assert len(kinds) == len(set(kinds)), "kinds must be unique"
    return cases
