"""How long `mplab report` takes, step by step: a quick campaign, and the paper's sweep size.

Usage::

    uv run --frozen python bench/report.py [runs/quick-...]   # default: the newest runs/quick-*
    uv run --frozen python bench/report.py CAMPAIGN --paper-size  # also a synthetic 30,375-record sweep

Prints the wall time of each report step (from the report's own progress callback) and, with
``--paper-size``, the ratio of the paper-sized build to the quick one, both measured in this run.
Reports are written to a temporary directory and removed.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from analysis.report import build_report

REPO = Path(__file__).resolve().parent.parent


def timed_build(inputs: list[Path], out: Path) -> tuple[float, dict[str, float], int]:
    marks: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    res = build_report(inputs, out, progress=lambda step, i, n: marks.append((step, time.perf_counter())))
    total = time.perf_counter() - t0
    ends = [t for _, t in marks[1:]] + [t0 + total]
    steps = {name: end - start for (name, start), end in zip(marks, ends)}
    return total, steps, len(res.figures)


def show(title: str, total: float, steps: dict[str, float], figures: int, records: int) -> None:
    print(f"\n{title}: {records} records, {figures} figures, {total:.2f} s")
    for name, s in steps.items():
        print(f"  {name:<28} {s:7.2f} s  {s / total:6.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", nargs="?", type=Path, help="campaign directory (default: newest runs/quick-*)")
    ap.add_argument("--paper-size", action="store_true", help="also time a synthetic paper-sized sweep")
    a = ap.parse_args()
    camp = a.campaign or max((REPO / "runs").glob("quick-*"), default=None)
    if camp is None:
        sys.exit("no campaign given and no runs/quick-*: run `make experiment` first")
    from harness.campaign.store import Campaign

    n_quick = len(Campaign.open(camp).records())
    with tempfile.TemporaryDirectory(prefix="mplab-bench-report-") as tmp:
        # The first build also pays for imports (matplotlib, scipy): build once untimed so both sizes
        # are measured warm, as a second `mplab report` in one process would be.
        t0 = time.perf_counter()
        build_report([camp], Path(tmp) / "warm")
        print(f"first build in this process (imports of matplotlib, scipy... included): "
              f"{time.perf_counter() - t0:.2f} s")
        total_q, steps_q, figs_q = timed_build([camp], Path(tmp) / "quick")
        show(f"quick campaign {camp.name}", total_q, steps_q, figs_q, n_quick)
        if a.paper_size:
            from rigs.synthetic import write_synthetic_campaign

            c = write_synthetic_campaign(Path(tmp) / "runs", "paper-size")
            n_paper = len(c.records())
            total_p, steps_p, figs_p = timed_build([c.path], Path(tmp) / "paper")
            show("synthetic paper-sized sweep (5 CCs x 1..9 receivers x 3 modes x 45 samples)", total_p, steps_p,
                 figs_p, n_paper)
            print(f"\nratio paper-sized / quick: {total_p / total_q:.1f}x time for {n_paper / n_quick:.0f}x records")


if __name__ == "__main__":
    main()
