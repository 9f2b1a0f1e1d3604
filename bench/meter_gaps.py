"""Which records a kept campaign flagged ``meter-gap``, judged again from their meter readings.

    uv run python bench/meter_gaps.py runs/<campaign> [--out FILE]

For every record whose sample kept its meter readings (``raw/<sample>/attempt-N/meter-<rx>.csv``), the window
[window_start, window_end] is integrated again as the recorder does (``integrate_means`` for an integrating
meter, ``integrate`` otherwise) and its gap judged both ways: the window's longest stretch without a reading
(the rule up to 2026-11-29) and ``judged_gap`` (an integrating meter: only the intervals the window's edges
cut). The poll period is the readings' median spacing; a gap counts past 3 of them, as in the recorder.

Printed: the records each rule flags, and per case the mean power of the records the old rule flagged beside
the others' (an integrating meter's late poll loses nothing: the two should not differ), and the energy
recomputed against the recorded one. Nothing is run; the campaign is only read.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.meters.base import Reading
from harness.meters.drivers import open_meter
from harness.meters.recorder import integrate, integrate_means, judged_gap

GAP_FACTOR = 3.0


def readings(path: Path) -> list[Reading]:
    def num(v: str) -> float | None:
        return float(v) if v not in ("", None) else None
    with path.open() as f:
        return [Reading(float(r["mono_s"]), float(r["wall_s"]), float(r["volts"]), float(r["amps"]),
                        float(r["watts"]), num(r.get("counter_wh", "")), num(r.get("device_watts", "")),
                        num(r.get("polled_wall_s", ""))) for r in csv.DictReader(f)]


def judge(campaign: Path) -> list[dict]:
    out = []
    for line in (campaign / "samples.jsonl").open():
        rec = json.loads(line)
        if rec.get("energy_j") is None and not any("meter-gap" in f for f in rec.get("flags") or []):
            continue
        csvs = sorted((campaign / "raw" / rec["sample_id"]).glob(f"attempt-*/meter-{rec['receiver']}.csv"))
        if not csvs or rec.get("window_start") is None:
            continue
        rs = readings(csvs[-1])
        t0, t1 = rec["window_start"], rec["window_end"]
        interval_mean = open_meter(rec["meter_kind"], "unopened").interval_mean  # the driver says
        try:
            e, _, gap = (integrate_means if interval_mean else integrate)(rs, t0, t1)
        except ValueError:
            continue
        period = statistics.median(b.wall_s - a.wall_s for a, b in zip(rs, rs[1:]))
        out.append({"sample": rec["sample_id"], "case": rec["case_id"], "receiver": rec["receiver"],
                    "window_s": t1 - t0, "period_s": period, "gap_s": gap,
                    "judged_s": judged_gap(rs, t0, t1, interval_mean, gap),
                    "old_flag": gap > GAP_FACTOR * period,
                    "new_flag": judged_gap(rs, t0, t1, interval_mean, gap) > GAP_FACTOR * period,
                    "recorded_flag": any("meter-gap" in f for f in rec.get("flags") or []),
                    "energy_j": e, "recorded_energy_j": rec.get("energy_j"), "speedup": rec.get("speedup") or 1,
                    "mean_w": e / (t1 - t0)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = judge(args.campaign)
    old = [r for r in rows if r["old_flag"]]
    new = [r for r in rows if r["new_flag"]]
    print(f"{len(rows)} records with meter readings; meter-gap by the window's longest stretch: {len(old)} "
          f"(recorded: {sum(r['recorded_flag'] for r in rows)}); by the edges' intervals: {len(new)}")
    # The energy as recorded is the same integral (per emulated second at S: the record scales it by S).
    ratio = [r["energy_j"] * r["speedup"] / r["recorded_energy_j"] for r in rows if r["recorded_energy_j"]]
    if ratio:
        print(f"recomputed / recorded energy: {min(ratio):.5f} .. {max(ratio):.5f}")
    by_case: dict[str, dict[bool, list[float]]] = defaultdict(lambda: {True: [], False: []})
    for r in rows:
        by_case[r["case"]][r["old_flag"]].append(r["mean_w"])
    print("\n| case | old rule flagged | mean power W (flagged) | mean power W (others) | largest gap s |")
    print("|---|---|---|---|---|")
    for case, v in sorted(by_case.items()):
        if not v[True]:
            continue
        gaps = [r["gap_s"] for r in rows if r["case"] == case and r["old_flag"]]
        print(f"| {case} | {len(v[True])} of {len(v[True]) + len(v[False])} | "
              f"{min(v[True]):.4f} .. {max(v[True]):.4f} | "
              + (f"{min(v[False]):.4f} .. {max(v[False]):.4f}" if v[False] else "-") + f" | {max(gaps):.2f} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
