"""Judge kept campaigns against kept S = 1 campaigns, cell by cell, with the rule of ``bench/speedup.py``.

    uv run python bench/speedup_judge.py --baseline A [--baseline B ...] --candidate C [--candidate D ...]
        [--mode both] [--out FILE]

Each of ``--baseline`` and ``--candidate`` is a campaign an earlier ``bench/speedup.py --keep`` run kept (a
directory holding ``samples.jsonl``); given twice or more, their samples are pooled per cell. The candidate is
usually a campaign at S > 1; two S = 1 campaigns against each other say how often the rule fails real time
against real time (what the rule costs a cell that did not change at all).

Printed: per cell the medians' ratios, the furthest sample, the S = 1 spread, the samples on each side, and
whether the cell holds and why not; then the cells holding per congestion control. Nothing is run.

``--into TABLE --key KEY``: write these cells into a recorded table (``bench/speedup.py --out``) under ``KEY``
(e.g. ``"emulated loss 0% s4"``), in place of the same cells there, and work the table's ``highest`` out again;
``--note`` is appended to the table's note (say which campaigns were pooled); ``--cores-from RUN`` takes the
cells' CPU cores from the table the candidate's own run wrote (``--out``) rather than from TABLE.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.emulation.speedup import highest_holding
from speedup import compare, kept_baseline, with_recorded_cores  # bench/speedup.py, beside this script


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, action="append", required=True)
    ap.add_argument("--candidate", type=Path, action="append", required=True)
    ap.add_argument("--mode", help="only the cells of this interface mode (wifi, lte, both)")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument("--into", type=Path, help="a recorded table to write these cells into (with --key)")
    ap.add_argument("--key", help="the table's section for these cells, e.g. 'emulated loss 0%% s4'")
    ap.add_argument("--note", default="", help="appended to the table's note (with --into)")
    ap.add_argument("--cores-from", type=Path, help="with --into: take each cell's CPU cores from this table "
                    "(the --out of the bench/speedup.py run that kept the candidate), section --key, instead of "
                    "the figures --into recorded")
    args = ap.parse_args()
    if bool(args.into) != bool(args.key):
        ap.error("--into and --key go together")
    for p in [*args.baseline, *args.candidate]:
        if not (p / "samples.jsonl").is_file():
            ap.error(f"{p}: not a kept campaign (no samples.jsonl)")
    base, cand = kept_baseline(args.baseline), kept_baseline(args.candidate)
    rows = {c: r for c, r in compare(base, cand).items() if not args.mode or c.endswith(f"-{args.mode}")}
    print("| cell | samples S = 1 / other | throughput median | worst | S = 1 spread | energy median | worst "
          "| holds |")
    print("|---|---|---|---|---|---|---|---|")
    for cell, r in sorted(rows.items()):
        n_base, n_cand = len(base["cells"][cell]["mbit"]), len(cand["cells"].get(cell, {}).get("mbit", []))
        print(f"| {cell} | {n_base} / {n_cand} | {r['mbit_ratio']} | {r['mbit_worst']} | {r.get('base_spread')} "
              f"| {r['energy_ratio']} | {r['energy_worst']} | {'yes' if r['holds'] else 'no: ' + r['why']} |")
    ccs = sorted({c.split("-")[0] for c in rows})
    held = {cc: f"{sum(r['holds'] for c, r in rows.items() if c.startswith(cc + '-'))}/"
                f"{sum(1 for c in rows if c.startswith(cc + '-'))}" for cc in ccs}
    print(f"\nholding: {sum(r['holds'] for r in rows.values())}/{len(rows)}; per control: {held}")
    if args.into:
        doc = json.loads(args.into.read_text())
        if args.key not in doc.get("cells", {}):
            ap.error(f"{args.into}: no section {args.key!r} (there: {', '.join(doc.get('cells', {}))})")
        measured = (json.loads(args.cores_from.read_text()).get("cells", {}).get(args.key, {}) if args.cores_from
                    else doc["cells"][args.key])
        doc["cells"][args.key].update(with_recorded_cores(measured, rows))
        doc["highest"] = highest_holding(doc["cells"], sorted({c.split("-")[0] for r in doc["cells"].values()
                                                              for c in r}))
        if args.note:
            doc["note"] = f"{doc.get('note', '')} {args.note}".strip()
        args.into.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"written into {args.into} [{args.key}]; highest per control: {doc['highest']}")
    if args.out:
        args.out.write_text(json.dumps({"baseline": [str(p) for p in args.baseline],
                                        "candidate": [str(p) for p in args.candidate], "cells": rows},
                                       indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
