"""A full disk under the runs directory: one clear line, exit 6, the session logged, every finished record
intact, and `--resume` completing once space is freed. The disk is a real tmpfs of a few MiB (root)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import small_inventory
from harness.campaign.store import Campaign
from harness.errors import EXIT_DISK_FULL
from harness.upkeep.clean import list_namespaces
from harness.hosts.local import LocalHost

from .conftest import REPO, mplab

pytestmark = pytest.mark.root


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path`` (unmounted after, whatever happened)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> Path:
    """Fill the disk under ``path`` to the last byte; returns the filler (delete it to free the space)."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 4096, 1):  # to the last byte
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def files(tmp: Path, prefix: str, samples: int) -> Path:
    inv = small_inventory(prefix, [(20, 8)]).model_dump(mode="json")
    (tmp / "inv.yaml").write_text(yaml.safe_dump(inv))
    sc = {"name": "full", "inventory": str(tmp / "inv.yaml"), "congestion_controls": ["cubic"], "retries": 0,
          "receiver_counts": [1], "modes": ["wifi"], "samples_per_case": samples, "file_size": "1M",
          "settle_s": 0}
    (tmp / "sc.yaml").write_text(yaml.safe_dump(sc))
    return tmp / "sc.yaml"


def test_a_full_disk_at_start_is_one_line_exit_6_and_creates_nothing(prefix, tmp_path):
    sc = files(tmp_path, prefix, 2)
    with tmpfs(tmp_path / "disk", "1m") as disk:
        res = mplab("run", str(sc), "--runs-dir", str(disk / "runs"), "--id", "c")
        assert res.returncode == EXIT_DISK_FULL, res.stderr[-2000:]
        assert "Traceback" not in res.stderr
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and "free" in lines[0] and "nothing was run" in lines[0], lines
        assert list(disk.iterdir()) == []
    assert not list_namespaces(LocalHost("root"), prefix)


def test_a_disk_that_fills_mid_run_keeps_every_record_logs_the_session_and_resumes(prefix, tmp_path):
    sc = files(tmp_path, prefix, 4)
    with tmpfs(tmp_path / "disk", "24m") as disk:
        path = disk / "runs" / "c"
        proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc), "--runs-dir", str(disk / "runs"),
                                 "--id", "c"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            deadline = time.monotonic() + 240
            samples = path / "samples.jsonl"
            while proc.poll() is None and time.monotonic() < deadline:
                if samples.exists() and samples.stat().st_size > 0:
                    break
                time.sleep(0.05)
            assert proc.poll() is None, "the run ended before the disk could be filled"
            filler = fill(disk)
            before = samples.read_bytes()
            err = proc.communicate(timeout=240)[1]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == EXIT_DISK_FULL, err[-3000:]
        assert "Traceback" not in err
        said = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(said) == 1 and "disk is full" in said[0] and "--resume" in said[0], err[-2000:]
        data = samples.read_bytes()
        assert data.startswith(before) and data.endswith(b"\n")  # finished records intact, no torn tail
        last = json.loads((path / "sessions.jsonl").read_text().splitlines()[-1])
        assert last["event"] == "failed" and last.get("disk_full") is True, last
        assert not list_namespaces(LocalHost("root"), prefix)
        # Still full: resume is refused before anything is built, and changes nothing.
        res = mplab("run", "--resume", str(path))
        assert res.returncode == EXIT_DISK_FULL and "Traceback" not in res.stderr, res.stderr[-2000:]
        assert samples.read_bytes() == data
        filler.unlink()
        res = mplab("run", "--resume", str(path), timeout=400)
        assert res.returncode == 0, res.stderr[-3000:]
        assert samples.read_bytes().startswith(data)
        recs = Campaign.open(path).records()
        ids = [r["sample_id"] for r in recs]
        assert sorted(ids) == sorted(Campaign.open(path).manifest["plan"]) and len(ids) == len(set(ids))
