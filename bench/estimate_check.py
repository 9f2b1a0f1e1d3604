"""How a kept campaign's samples ran against the sharing model the dry-run estimate uses, storms apart.

    uv run python bench/estimate_check.py CAMPAIGN [CAMPAIGN ...] [--storm 10] [--storm-min 1000]

Per sample of an emulated campaign: its slowest receiver's transfer time (testbed seconds, as records give it)
over the slowest the sharing model predicts for it (``harness.campaign.campaign.model_slowest_s``, which the
dry run's ``sample_estimates_s`` uses, from the inventory the campaign's manifest holds). A
sample is a storm when it is flagged ``cc-fault``, or (campaigns from before that flag) when one receiver
retransmitted more than ``--storm`` times the sample's median receiver and at least ``--storm-min`` packets:
the flood of the kernel fault that ``cc-fault`` names makes one subflow retransmit thousands to tens of
thousands of packets where its neighbours in the sample retransmit tens to hundreds.
Printed per cell (control, receivers, mode): the samples, the storms, the median ratio of the others and the
storms'; then per mode: the sum of slowest transfer times of clean and storm samples against the model's sum;
then the attempts the runner stopped on a cc-fault (``stopped.json`` in their directories): how far into the
transfer, against the cell's clean samples' slowest transfer (what each would have taken at the least).
Nothing is run.
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from harness.campaign.campaign import model_slowest_s
from harness.campaign.runner import CC_FAULT, STOPPED_FILE
from harness.config.inventory import Inventory


def is_storm(recs: list[dict], ratio: float, least: int) -> bool:
    """Flagged ``cc-fault``, or one receiver's retransmissions far above the sample's median receiver's."""
    if any(f.startswith(CC_FAULT) for r in recs for f in r.get("flags") or []):
        return True
    rts = [r.get("retransmits") or 0 for r in recs]
    return max(rts) >= least and max(rts) > ratio * max(statistics.median(rts), 1)


def samples(campaign: Path) -> tuple[Inventory, list[list[dict]]]:
    manifest = json.loads((campaign / "manifest.json").read_text())
    inv = Inventory.model_validate(manifest["inventory"])
    if inv.emulation is None:
        raise SystemExit(f"{campaign}: not an emulated campaign (its inventory has no emulation section)")
    by: dict[str, list[dict]] = defaultdict(list)
    with (campaign / "samples.jsonl").open() as f:
        for rec in map(json.loads, f):
            if rec.get("sample_status") == "ok" and rec.get("policy") is None:
                by[rec["sample_id"]].append(rec)
    return inv, list(by.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storm", type=float, default=10.0,
                    help="a receiver's retransmissions over the sample's median receiver's that make a storm")
    ap.add_argument("--storm-min", type=int, default=1000, help="and the fewest retransmissions that make one")
    ap.add_argument("campaigns", type=Path, nargs="+")
    args = ap.parse_args()
    for p in args.campaigns:
        if not (p / "samples.jsonl").is_file() or not (p / "manifest.json").is_file():
            ap.error(f"{p}: not a kept campaign (no samples.jsonl or manifest.json)")
    rows = []
    for p in args.campaigns:
        inv, groups = samples(p)
        for recs in groups:
            r0 = recs[0]
            stops = [json.loads(f.read_text())["after_s"]
                     for f in sorted((p / "raw" / r0["sample_id"]).glob(f"attempt-*/{STOPPED_FILE}"))]
            rows.append({"cell": (r0["cc"], r0["n_receivers"], r0["mode"]), "speedup": r0.get("speedup") or 1.0,
                         "stops": stops,
                         "slowest_s": max(r["duration_s"] for r in recs),
                         "model_s": model_slowest_s(inv, r0["file_bytes"], [r["receiver"] for r in recs], r0["mode"]),
                         "storm": is_storm(recs, args.storm, args.storm_min)})
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        cells[row["cell"]].append(row)
    print(f"{'cell':<20} {'samples':>7} {'storms':>6} {'clean x model':>13} {'storm x model':>13}")
    for cell, rs in sorted(cells.items()):
        clean = [r["slowest_s"] / r["model_s"] for r in rs if not r["storm"]]
        storm = [r["slowest_s"] / r["model_s"] for r in rs if r["storm"]]
        print(f"{'-'.join(map(str, cell)):<20} {len(rs):>7} {len(storm):>6} "
              f"{statistics.median(clean) if clean else float('nan'):>13.3f} "
              f"{statistics.median(storm) if storm else float('nan'):>13.3f}")
    print(f"\n{'mode':<6} {'model s':>9} {'clean s':>9} {'(model)':>9} {'storm s':>9} {'(model)':>9}")
    for mode in ("wifi", "lte", "both"):
        rs = [r for r in rows if r["cell"][2] == mode]
        if not rs:
            continue
        clean, storm = [r for r in rs if not r["storm"]], [r for r in rs if r["storm"]]
        print(f"{mode:<6} {sum(r['model_s'] for r in rs):>9.0f} {sum(r['slowest_s'] for r in clean):>9.0f} "
              f"{sum(r['model_s'] for r in clean):>9.0f} {sum(r['slowest_s'] for r in storm):>9.0f} "
              f"{sum(r['model_s'] for r in storm):>9.0f}")
    stopped = [(r, a) for r in rows for a in r["stops"]]
    if stopped:
        print(f"\n{'cell':<20} {'stopped':>7} {'at s (median)':>13} {'clean s (median)':>16}")
        for cell, rs in sorted(cells.items()):
            at = [a for r in rs for a in r["stops"]]
            clean = [r["slowest_s"] / r["speedup"] for r in rs if not r["storm"]]
            if at:
                print(f"{'-'.join(map(str, cell)):<20} {len(at):>7} {statistics.median(at):>13.2f} "
                      f"{statistics.median(clean) if clean else float('nan'):>16.2f}")
        print(f"all: {len(stopped)} attempts stopped at {sum(a for _, a in stopped):.0f} wall s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
