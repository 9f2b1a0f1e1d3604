"""Parallel testbeds on one machine: samples per hour and fidelity for K = 1..4 (`mplab run --testbeds K`).

Run as root on a machine with kernel MPTCP and iperf3 (`make bpf` for lia):

    uv run python bench/parallel.py [--max-k 4] [--samples-per-case 2] [--file-size 8M]

For each K, one small campaign (the default 9-receiver inventory, 3 receivers per sample,
cubic and lia, WiFi and MPTCP, the same seeded plan) runs through ``start_campaign`` on K
copies of the testbed. Reported per K, in one run:

* samples/hour over the sweep (set-up of the copies excluded; it is reported apart);
* the manifest's interference: CPU busy (mean, max), median start skew, achieved/configured
  rate per copy;
* per case, mean throughput and mean energy per receiver at K divided by the same at K = 1.

Then the K it recommends (the largest K whose every case keeps throughput and energy within
10 % of K = 1 and gains samples/hour), and the wall time of paper-setup1 at that K and on a
10-machine cluster (that many times the single-machine rate: shards are independent).
The machine is shared with other engineers: runs are small and numbers are indicative.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.campaign.campaign import dry_run_estimate_s, start_campaign
from harness.campaign.plan import plan_campaign
from harness.campaign.summary import summarize
from harness.config.inventory import Inventory, load_inventory
from harness.config.scenario import Scenario, load_scenario
from harness.upkeep.clean import clean_prefix

REPO = Path(__file__).resolve().parent.parent

TOLERANCE = 0.10


def _inventory(prefix: str) -> Inventory:
    data = load_inventory(REPO / "inventory" / "emulated.yaml").model_dump(mode="json")
    data["emulation"]["namespace_prefix"] = prefix
    return Inventory.model_validate(data)


def one_k(k: int, scenario: Scenario, runs: Path) -> dict:
    prefix = f"mplab-bp{uuid.uuid4().hex[:5]}-"
    inv = _inventory(prefix)
    t0 = time.monotonic()
    try:
        c = start_campaign(scenario, inv, runs, campaign_id=f"k{k}", testbeds=k, force=True)
    finally:
        clean_prefix(prefix)
    wall = time.monotonic() - t0
    itf = c.manifest["interference"][-1]
    sweep = itf["ended_at"] - itf["started_at"]
    recs = c.records()
    cases = {s.case_id: s for s in summarize(recs)}
    tbs = itf["testbeds"].values()
    skews = [t["start_skew_median_s"] for t in tbs if t["start_skew_median_s"] is not None]
    return {
        "k": k, "samples": len({r["sample_id"] for r in recs}),
        "ok": len({r["sample_id"] for r in recs if r["sample_status"] == "ok"}),
        "wall_s": wall, "sweep_s": sweep, "setup_s": wall - sweep,
        "samples_per_hour": len({r["sample_id"] for r in recs}) / sweep * 3600,
        "cpu_busy_mean": itf["cpu_busy_mean"], "cpu_busy_max": itf["cpu_busy_max"],
        "load_start": itf["loadavg_1m_start"], "own_cpu_cores": itf.get("own_cpu_cores"),
        "skew_median_ms": 1000 * statistics.median(skews) if skews else None,
        "rate_ratio": [t["rate_ratio_mean"] for t in tbs],
        "cases": {cid: {"mbit": s.mean_throughput_mbit, "energy_j": s.mean_energy_j} for cid, s in cases.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-k", type=int, default=4)
    ap.add_argument("--samples-per-case", type=int, default=2)
    ap.add_argument("--file-size", default="8M")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    sc = Scenario(name="bench-parallel", congestion_controls=["cubic", "lia"], receiver_counts=[3],
                  modes=["wifi", "both"], samples_per_case=args.samples_per_case, file_size=args.file_size,
                  transfer_timeout_s=120, retries=1, settle_s=0.5, seed=11)
    results = []
    with tempfile.TemporaryDirectory(prefix="mplab-bench-par-") as tmp:
        for k in range(1, args.max_k + 1):
            r = one_k(k, sc, Path(tmp))
            results.append(r)
            print(f"K={k}: {r['samples']} samples ({r['ok']} ok) in {r['sweep_s']:.0f} s (+{r['setup_s']:.0f} s set-up):"
                  f" {r['samples_per_hour']:.0f} samples/h; CPU busy {100 * r['cpu_busy_mean']:.0f}% "
                  f"(max {100 * r['cpu_busy_max']:.0f}%, load {r['load_start']:.1f} at start; mplab itself "
                  f"{r['own_cpu_cores'] or 0:.2f} cores); start skew median "
                  f"{r['skew_median_ms']:.1f} ms; achieved/configured "
                  f"{', '.join(f'{x:.2f}' for x in r['rate_ratio'] if x is not None)}", flush=True)
    base = results[0]
    print("\nper case, mean per receiver at K / at K=1 (throughput, energy):")
    recommended = 1
    for r in results[1:]:
        worst = 0.0
        parts = []
        for cid, v in sorted(r["cases"].items()):
            b = base["cases"].get(cid)
            if not b or not b["mbit"] or not v["mbit"] or not b["energy_j"] or not v["energy_j"]:
                parts.append(f"{cid}: -")
                worst = 1.0
                continue
            tr, er = v["mbit"] / b["mbit"], v["energy_j"] / b["energy_j"]
            worst = max(worst, abs(1 - tr), abs(1 - er))
            parts.append(f"{cid}: {tr:.2f}, {er:.2f}")
        r["speedup"] = r["samples_per_hour"] / base["samples_per_hour"]
        r["worst_deviation"] = worst
        print(f"  K={r['k']} (x{r['speedup']:.2f} samples/h, worst deviation {100 * worst:.0f}%): " + "; ".join(parts))
        if worst <= TOLERANCE and r["speedup"] > 1.05 and r["k"] == recommended + 1:
            recommended = r["k"]
    paper = load_scenario(REPO / "scenarios" / "paper-setup1.yaml")
    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    est_s = dry_run_estimate_s(plan_campaign(paper, inv), paper, inv)
    speed = results[recommended - 1].get("speedup", 1.0)
    print(f"\nrecommended K on this machine: {recommended} (x{speed:.2f} samples/h)")
    print(f"paper-setup1: {est_s / 86400:.1f} days on one testbed (dry-run estimate), {est_s / speed / 86400:.1f} days "
          f"at K={recommended}, {est_s / speed / 10 / 3600:.1f} h on a 10-machine cluster at K={recommended} each")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "recommended": recommended}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
