"""Cost of the tests' leak check (rigs.leaks.leftovers), run after every test that takes `prefix`.

    sudo uv run --frozen python bench/leakcheck.py [--calls 200]

Times the check on this machine as it is (other people's namespaces and processes included: the
check pays for every pid in /proc and every namespace listed), with nothing of its own prefix to
find, and the same with one namespace to find. Prints the median and the 95th percentile per call,
and the number of pids and namespaces it looked through.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import uuid

from rigs import leaks


def _time(prefix: str, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        leaks.leftovers(prefix)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    prefix = f"mplab-b{uuid.uuid4().hex[:6]}-"
    pids = sum(1 for e in os.scandir("/proc") if e.name.isdigit())
    namespaces = len(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines())
    clean = _time(prefix, args.calls)
    subprocess.run(["ip", "netns", "add", f"{prefix}n1"], check=True)
    try:
        leaked = _time(prefix, max(1, args.calls // 4))
    finally:
        subprocess.run(["ip", "netns", "del", f"{prefix}n1"], check=False)

    def ms(xs: list[float]) -> dict:
        xs = sorted(xs)
        return {"median_ms": round(1000 * statistics.median(xs), 2),
                "p95_ms": round(1000 * xs[int(0.95 * (len(xs) - 1))], 2)}

    print(json.dumps({"pids": pids, "namespaces": namespaces, "nothing_left": ms(clean),
                      "one_namespace_left": ms(leaked)}, indent=1))


if __name__ == "__main__":
    main()
