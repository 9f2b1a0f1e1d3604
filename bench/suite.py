"""The whole test suite's wall time, its slowest tests and the machine's load while it ran (the suite's budget: < 15 min).

    uv run --frozen python bench/suite.py [--durations 30] [--json out.json] [-- extra pytest args]

Runs `make test` as CI does (its steps each with `-q --durations=N`), samples the load average every
10 s, and prints: wall time, the pytest summary lines, user+system CPU of the run (children included),
the load average (mean / max) and the slowest N tests. The load matters: other engineers' testbeds
share the machine, and most of a test's time is waiting, which load stretches.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--durations", type=int, default=30)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--log", type=Path, help="write pytest's whole output here")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args()

    loads: list[float] = []
    done = threading.Event()

    def sample_load() -> None:
        while not done.wait(10.0):
            loads.append(os.getloadavg()[0])

    loads.append(os.getloadavg()[0])
    threading.Thread(target=sample_load, daemon=True).start()
    t0 = time.monotonic()
    c0 = os.times()
    # SIGINT back to its default: started in the background from a shell (`... &`), this process and its
    # children ignore it, and the tests that stop campaigns with Ctrl-C then fail.
    # What CI runs: `make test` (its two steps: most of the suite on xdist workers, then the `machine` tests alone).
    extra = shlex.join(["-q", f"--durations={args.durations}", *args.pytest_args])
    proc = subprocess.run(["make", "--no-print-directory", "test", f"PYTEST_ARGS={extra}"], cwd=REPO,
                          capture_output=True, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wall_s = time.monotonic() - t0
    c1 = os.times()
    done.set()
    out = proc.stdout
    if args.log:
        args.log.write_text(out + proc.stderr)
    summary = " + ".join(ln.strip("= ") for ln in out.splitlines()
                         if re.search(r"\d+ (passed|failed).* in [\d.]+s", ln)) or "no summary line"
    slow = re.findall(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)$", out, flags=re.M)
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    cpu_s = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    figures = {
        "wall_s": round(wall_s, 1), "returncode": proc.returncode, "summary": summary,
        "cpu_s": round(cpu_s, 1), "load_mean": round(sum(loads) / len(loads), 2), "load_max": round(max(loads), 2),
        "cores": os.cpu_count(), "skipped": skipped,
        "slowest": [{"s": float(s), "phase": ph, "test": t} for s, ph, t in slow],
    }
    print(f"suite: {summary} in {wall_s / 60:.1f} min (exit {proc.returncode}); CPU {cpu_s / 60:.1f} min; "
          f"load average mean {figures['load_mean']} max {figures['load_max']} on {figures['cores']} cores")
    for ln in skipped:
        print(ln)
    print(f"slowest {len(slow)}:")
    for s, ph, t in slow:
        print(f"  {float(s):7.2f}s {ph:8s} {t}")
    if proc.returncode not in (0, 5):
        print(out[-6000:], file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
