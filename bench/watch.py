"""`mplab watch`: update latency (record written -> shown on the page) and what a watcher costs the runner.

Runs the same small emulated campaign (the real `mplab run`, in its own process) several times,
alternating without a watcher and with one (the real `mplab watch` and the page open in headless
Chromium), and reports from this one run:

  - latency: for each sample, the time its records were appended to samples.jsonl (seen by polling
    the file every 2 ms here) to the time the page's n/N showed it (a MutationObserver in the page;
    both clocks are this machine's wall clock): p50, p95, max. Target: p95 <= 1 s.
  - the runner's CPU time (user + system of `mplab run` and everything it waited for, from wait4)
    per sample, and each sample's wall time (from the runner's per-sample lines), with and without
    a watcher; and the watcher's own CPU time (its process, read from /proc).

Optionally saves screenshots of the page while the campaign runs and once it has finished.
Needs root (namespaces). Run one heavy thing at a time:

    nice -n 10 uv run --frozen python bench/watch.py [--pairs 2] [--screenshots docs/figures]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml

from harness.upkeep.clean import clean_prefix
from rigs import watchrig

from rigs.inventories import small_inventory

REPO = Path(__file__).resolve().parent.parent

SAMPLE_LINE = re.compile(r"^(ok|failed)\s+(\S+)\s+([\d.]+) s\b", re.M)


def campaign_files(tmp: Path, prefix: str, samples: int) -> Path:
    """Two receivers; cubic with 1 and 2 receivers, WiFi only and MPTCP on both: 4 cases x ``samples``."""
    inv = small_inventory(prefix, [(20, 8), (15, 6)])
    (tmp / "inv.yaml").write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    sc = {"name": "watchbench", "inventory": str(tmp / "inv.yaml"), "congestion_controls": ["cubic"],
          "receiver_counts": [1, 2], "modes": ["wifi", "both"], "samples_per_case": samples, "file_size": "2M",
          "settle_s": 0, "retries": 0, "seed": 7}
    (tmp / "sc.yaml").write_text(yaml.safe_dump(sc))
    return tmp / "sc.yaml"


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (itself only)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class AppendClock:
    """Polls samples.jsonl and notes when each sample's records were appended (wall clock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.times: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        offset, samples = 0, set()
        while not self.stop.is_set():
            try:
                with open(self.path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                data = b""
            now = time.time()
            data = data[:data.rfind(b"\n") + 1]
            offset += len(data)
            for line in data.splitlines():  # a sample's records (one per receiver) are one append
                sid = json.loads(line)["sample_id"]
                if sid not in samples:
                    samples.add(sid)
                    self.times.append(now)
            time.sleep(0.002)


def run_campaign(sc: Path, runs: Path, cid: str, watch: bool, shots: Path | None) -> dict:
    env = {**os.environ, "MPLAB_LOG": "ERROR"}
    proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc), "--runs-dir", str(runs), "--id", cid],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out: dict = {"watch": watch}
    run_dir = runs / cid
    while not (run_dir / "manifest.json").exists():
        if proc.poll() is not None:  # (reaps it: only when it has failed already)
            raise SystemExit(f"mplab run exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    clock = AppendClock(run_dir / "samples.jsonl")
    watcher = None
    stdout_text: list[str] = []
    reader = threading.Thread(target=lambda: stdout_text.append(proc.stdout.read()), daemon=True)
    reader.start()
    if watch:
        watcher = watchrig.start_watcher(run_dir)
        cpu0 = proc_cpu_s(watcher.proc.pid)
        with contextlib.ExitStack() as stack:
            stack.callback(watcher.stop)  # also when the browser fails
            page, problems = stack.enter_context(watchrig.chromium_page(watcher.url, height=1400))
            attached = page.evaluate("""() => { window.seen = [];
                new MutationObserver(() => window.seen.push([Date.now() / 1000,
                    document.getElementById('n').textContent, Number(document.body.dataset.stateNow)]))
                  .observe(document.getElementById('n'), {childList: true, characterData: true, subtree: true});
                return Date.now() / 1000; }""")
            planned = len(json.loads((run_dir / "manifest.json").read_text())["plan"])
            shot_at = planned // 2
            while reader.is_alive():  # stdout ends when the run does (poll() would reap it before wait4)
                if shots and shot_at and len(clock.times) >= shot_at:
                    time.sleep(1.2)  # into the next sample's transfer or tail
                    page.screenshot(path=str(shots / "watch-running.png"), full_page=True)
                    shot_at = 0
                time.sleep(0.05)
            time.sleep(2.0)  # the last update reaches the page
            if shots:
                page.screenshot(path=str(shots / "watch-finished.png"), full_page=True)
            seen = page.evaluate("window.seen")
            out["problems"] = problems.all
            out["watcher_cpu_s"] = proc_cpu_s(watcher.proc.pid) - cpu0
        shown: dict[int, float] = {}
        made: dict[int, float] = {}  # when the watcher made the snapshot that showed it
        for t, text, state_now in seen:
            shown.setdefault(int(text.split("/")[0]), t)
            made.setdefault(int(text.split("/")[0]), state_now)
        # Samples appended before the page was watching (the watcher takes seconds to start) are not counted.
        out["latency_s"] = [shown[k + 1] - t for k, t in enumerate(clock.times) if k + 1 in shown and t > attached]
        out["not_shown"] = [k + 1 for k, t in enumerate(clock.times) if k + 1 not in shown and t > attached]
        out["before_page"] = sum(1 for t in clock.times if t <= attached)
        out["server_s"] = [made[k + 1] - t for k, t in enumerate(clock.times) if k + 1 in made and t > attached]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    clock.stop.set()
    reader.join(10)
    walls = [float(m.group(3)) for m in SAMPLE_LINE.finditer(stdout_text[0] if stdout_text else "")]
    recs = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    out["flags"] = sorted({f.split(":")[0] for r in recs for f in r["flags"]})
    out["flagged_records"] = sum(1 for r in recs if r["flags"])
    out.update(rc=proc.returncode, samples=len(clock.times), cpu_s=usage.ru_utime + usage.ru_stime, wall_s=walls)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2, help="runs without and with a watcher, alternating")
    ap.add_argument("--samples", type=int, default=4, help="samples per case (4 cases)")
    ap.add_argument("--screenshots", type=Path, default=None, help="save watch-running.png and watch-finished.png")
    args = ap.parse_args()
    prefix = f"mplab-bw{uuid.uuid4().hex[:4]}-"
    results = []
    with tempfile.TemporaryDirectory(prefix="mplab-watchbench-") as tmp:
        sc = campaign_files(Path(tmp), prefix, args.samples)
        try:
            for i in range(args.pairs):
                for watch in (False, True):
                    shots = args.screenshots if (watch and i == args.pairs - 1) else None
                    r = run_campaign(sc, Path(tmp) / "runs", f"b{i}{'w' if watch else 'n'}", watch, shots)
                    results.append(r)
                    print(f"run {i} {'with' if watch else 'without'} watcher: rc {r['rc']}, {r['samples']} samples, "
                          f"runner CPU {r['cpu_s']:.1f} s, flagged records {r['flagged_records']} {r['flags']}, "
                          f"sample wall median {statistics.median(r['wall_s']):.2f} s"
                          + (f", watcher CPU {r['watcher_cpu_s']:.1f} s, latency p95 {pct(r['latency_s'], .95):.3f} s"
                             if watch else ""), flush=True)
        finally:
            clean_prefix(prefix)
    report(results)


def report(results: list[dict]) -> None:
    lat = [x for r in results if r["watch"] for x in r["latency_s"]]
    missing = [k for r in results if r["watch"] for k in r["not_shown"]]
    problems = [p for r in results if r["watch"] for p in r["problems"]]
    before = sum(r["before_page"] for r in results if r["watch"])
    print(f"\nupdate latency (record appended -> page's n/N), {len(lat)} samples ({before} recorded before the "
          f"page was open left out): p50 {pct(lat, .5):.3f} s, "
          f"p95 {pct(lat, .95):.3f} s, max {max(lat):.3f} s (target p95 <= 1 s: "
          f"{'met' if pct(lat, .95) <= 1 else 'NOT met'}); counts never shown: {missing or 'none'}; "
          f"page problems: {problems or 'none'}")
    srv = [x for r in results if r["watch"] for x in r["server_s"]]
    print(f"  of which: append -> the watcher's snapshot p50 {pct(srv, .5):.3f} s, p95 {pct(srv, .95):.3f} s; "
          "the rest is the push and the browser")
    for watch in (False, True):
        rs = [r for r in results if r["watch"] == watch]
        cpu = [r["cpu_s"] / r["samples"] for r in rs]
        walls = [w for r in rs for w in r["wall_s"]]
        print(f"{'with' if watch else 'without'} watcher: runner CPU per sample {statistics.mean(cpu):.3f} s "
              f"(runs: {', '.join(f'{c:.3f}' for c in cpu)}); sample wall median {statistics.median(walls):.2f} s, "
              f"mean {statistics.mean(walls):.2f} s, stdev {statistics.stdev(walls):.2f} s (n={len(walls)})")
    w = [r for r in results if r["watch"]]
    print("watcher's own CPU per sample: " + ", ".join(f"{r['watcher_cpu_s'] / r['samples']:.3f} s" for r in w))
    walls_n = [x for r in results if not r["watch"] for x in r["wall_s"]]
    walls_w = [x for r in results if r["watch"] for x in r["wall_s"]]
    cpu_n = statistics.mean(r["cpu_s"] / r["samples"] for r in results if not r["watch"])
    cpu_w = statistics.mean(r["cpu_s"] / r["samples"] for r in w)
    print(f"ratios with/without: runner CPU per sample {cpu_w / cpu_n:.3f}, sample wall mean "
          f"{statistics.mean(walls_w) / statistics.mean(walls_n):.3f}")


if __name__ == "__main__":
    main()
