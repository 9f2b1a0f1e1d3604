"""Where `make test`'s time goes: wall and CPU per test module, from one run of the suite.

    uv run python bench/suite_cpu.py [--log FILE] [--top N]          (as root: runs `make test` with the log, then sums it)
    uv run python bench/suite_cpu.py --log FILE --report-only [--top N]   (sums an existing log)

Each test writes one line (tests/conftest.py, ``MPLAB_TEST_CPU_LOG``): its wall time, its process's CPU and that of
the children it reaped. On a 2-core machine the suite's CPU total bounds how fast it can run at all (half of it
is a floor on the wall time), and a module's wall time is a floor on the step it runs in: pytest-xdist gives a
module to one worker (``--dist loadfile``). This tells the two apart.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def summarise(lines: list[dict], top: int) -> str:
    mods: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in lines:
        m = mods[r["test"].split("::")[0]]
        m[0] += r["wall_s"]
        m[1] += r["cpu_s"]
        m[2] += r["children_cpu_s"]
        m[3] += 1
    total_cpu = sum(m[1] + m[2] for m in mods.values())
    out = [f"{len(lines)} tests in {len(mods)} modules: {sum(m[0] for m in mods.values()) / 60:.1f} test-minutes of "
           f"wall time, {total_cpu / 60:.1f} CPU-minutes (tests' own processes and the children they reaped)",
           "", "| module | tests | wall (s) | CPU (s) | of which children (s) | CPU / wall |", "|---|---|---|---|---|---|"]
    for name, (wall, own, children, n) in sorted(mods.items(), key=lambda kv: -kv[1][0])[:top]:
        out.append(f"| {name} | {n} | {wall:.1f} | {own + children:.1f} | {children:.1f} | "
                   f"{(own + children) / wall if wall else 0:.2f} |")
    out += ["", "| test (by CPU) | wall (s) | CPU (s) |", "|---|---|---|"]
    for r in sorted(lines, key=lambda r: -(r["cpu_s"] + r["children_cpu_s"]))[:top]:
        out.append(f"| {r['test']} | {r['wall_s']:.1f} | {r['cpu_s'] + r['children_cpu_s']:.1f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=Path("/tmp/mplab-suite-cpu.jsonl"))
    ap.add_argument("--report-only", action="store_true", help="sum an existing log; run nothing")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    if not args.report_only:
        args.log.unlink(missing_ok=True)
        t0 = time.monotonic()
        rc = subprocess.run(["make", "test"], cwd=REPO,
                            env={**os.environ, "MPLAB_TEST_CPU_LOG": str(args.log.resolve())}).returncode
        print(f"make test: exit {rc}, {(time.monotonic() - t0) / 60:.1f} min", flush=True)
    if not args.log.exists():
        sys.exit(f"suite_cpu: {args.log}: no log (was the suite run with MPLAB_TEST_CPU_LOG?)")
    print(summarise([json.loads(x) for x in args.log.read_text().splitlines() if x.strip()], args.top))


if __name__ == "__main__":
    main()
