"""Per-sample orchestration overhead and start skew on the emulated testbed.

Runs N samples with all nine receivers (MPTCP, a small file) through the real Runner
and reports, from this one run:
  - overhead per sample = sample wall time - transfer time of its slowest receiver (median, p95)
  - start skew = spread of the receivers' actual start times within a sample (p95, max)
Targets (README, Benchmarks): median overhead <= 0.5 s, p95 skew <= 20 ms. Needs root.

    uv run python bench/overhead.py [--samples 12] [--receivers 9]
"""
from __future__ import annotations

import argparse
import statistics

from _common import pct, plan, runner

from harness.config.scenario import Scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=12)
    ap.add_argument("--receivers", type=int, default=9)
    ap.add_argument("--file-size", default="1M")
    ap.add_argument("--mode", default="both")
    args = ap.parse_args()
    sc = Scenario(name="overhead", congestion_controls=["cubic"], receiver_counts=[args.receivers],
                  modes=[args.mode], samples_per_case=args.samples, file_size=args.file_size, settle_s=0, retries=0)
    overheads, skews_ms = [], []
    with runner("mplab-bench-ovh-", sc) as (r, tb):
        names = tuple(x.name for x in tb.inventory.receivers[:args.receivers])
        for i in range(1, args.samples + 1):
            out = r.run_sample(plan("cubic", args.mode, names, i))
            starts = [x["started_at"] for x in out.records if x["started_at"] is not None]
            ends = [x["window_end"] for x in out.records if x["window_end"] is not None]
            first = min(starts)
            transfer = max(ends) - first
            overheads.append(out.wall_s - out.idle_s - transfer)  # waiting out radio tails is not overhead
            skews_ms.append((max(starts) - first) * 1000)
    print(f"samples: {args.samples}, receivers: {args.receivers}, mode: {args.mode}, file: {args.file_size}")
    print(f"overhead per sample (wall - transfer): median {statistics.median(overheads):.3f} s, "
          f"p95 {pct(overheads, 95):.3f} s  (target median <= 0.5 s)")
    print(f"start skew across receivers: p95 {pct(skews_ms, 95):.2f} ms, max {max(skews_ms):.2f} ms "
          f"(target p95 <= 20 ms)")


if __name__ == "__main__":
    main()
