"""Benchmark: each congestion control on the quick scenario, relative to cubic.

    uv run python bench/cc.py [--scenario scenarios/quick.yaml] [--prefix mplab-bcc-]

Runs the scenario on the emulated testbed (under its own namespace prefix, so it never
touches another testbed) and prints, per algorithm, ratios to cubic measured in this
one run (shuffled samples, so slow drifts of the machine spread over all algorithms):

- aggregate throughput: per sample, all receivers' bytes over the span from the first
  start to the last finish; mean over samples;
- CPU per transferred GB, two ways: the iperf3 processes' own CPU time (sender and
  receivers, from iperf3's rusage; in-kernel TCP work done in their context, including
  the congestion control on ACKs that arrive through a veth, is charged to them), and
  machine-wide busy time during the transfers (includes everything else that ran).

Absolute numbers depend on the machine; the ratios are the result.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

from harness.campaign.campaign import start_campaign
from harness.config.load import load_yaml_model
from harness.config.inventory import Inventory
from harness.config.scenario import load_scenario, scenario_inventory

REPO = Path(__file__).resolve().parent.parent

TICK_S = 0.05


class BusySampler(threading.Thread):
    """Machine-wide busy CPU-seconds from /proc/stat, sampled every TICK_S."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.stop_event = threading.Event()
        self.hz = 100.0

    @staticmethod
    def busy_jiffies() -> int:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]   # idle + iowait
        return sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.samples.append((time.time(), self.busy_jiffies() / self.hz))
            time.sleep(TICK_S)

    def busy_between(self, t0: float, t1: float) -> float:
        inside = [b for t, b in self.samples if t0 <= t <= t1]
        before = [b for t, b in self.samples if t < t0]
        after = [b for t, b in self.samples if t > t1]
        start = before[-1] if before else (inside[0] if inside else 0.0)
        end = after[0] if after else (inside[-1] if inside else start)
        return end - start


def iperf3_cpu_s(raw: Path) -> float:
    """CPU seconds of the client and the server of one receiver's transfer."""
    doc = json.loads(raw.read_text())
    end = doc["end"]
    cpu = end.get("cpu_utilization_percent") or {}
    seconds = float(end["sum_received"]["seconds"])
    return (float(cpu.get("host_total", 0)) + float(cpu.get("remote_total", 0))) / 100.0 * seconds


def analyse(campaign_dir: Path, records: list[dict], sampler: BusySampler) -> dict:
    by_sample: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_sample[r["sample_id"]].append(r)
    per_cc: dict[str, dict] = defaultdict(lambda: {"agg_mbit": [], "agg_mbit_both": [], "bytes": 0,
                                                   "iperf3_cpu_s": 0.0, "busy_cpu_s": 0.0, "failed": 0})
    for sid, recs in by_sample.items():
        cc = recs[0]["cc"]
        d = per_cc[cc]
        if any(r["status"] != "ok" for r in recs):
            d["failed"] += 1
            continue
        t0 = min(r["window_start"] for r in recs)
        t1 = max(r["window_end"] for r in recs)
        nbytes = sum(r["bytes"] for r in recs)
        agg = nbytes * 8 / (t1 - t0) / 1e6
        d["agg_mbit"].append(agg)
        if recs[0]["mode"] == "both":
            d["agg_mbit_both"].append(agg)
        d["bytes"] += nbytes
        d["busy_cpu_s"] += sampler.busy_between(t0, t1)
        attempt = max(r["attempts"] for r in recs)
        for r in recs:
            d["iperf3_cpu_s"] += iperf3_cpu_s(campaign_dir / "raw" / sid / f"attempt-{attempt}"
                                              / f"iperf3-{r['receiver']}.json")
    out = {}
    for cc, d in per_cc.items():
        gb = d["bytes"] / 1e9
        out[cc] = {"samples_ok": len(d["agg_mbit"]), "samples_failed": d["failed"],
                   "agg_mbit": statistics.fmean(d["agg_mbit"]) if d["agg_mbit"] else None,
                   "agg_mbit_both": statistics.fmean(d["agg_mbit_both"]) if d["agg_mbit_both"] else None,
                   "iperf3_cpu_s_per_gb": d["iperf3_cpu_s"] / gb if gb else None,
                   "busy_cpu_s_per_gb": d["busy_cpu_s"] / gb if gb else None}
    return out


def ratios(stats: dict, base: str = "cubic") -> dict:
    b = stats[base]
    return {cc: {k: (v[k] / b[k] if v[k] and b[k] else None)
                 for k in ("agg_mbit", "agg_mbit_both", "iperf3_cpu_s_per_gb", "busy_cpu_s_per_gb")}
            for cc, v in stats.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=str(REPO / "scenarios" / "quick.yaml"))
    ap.add_argument("--prefix", default=f"mplab-bcc{uuid.uuid4().hex[:4]}-",
                    help="namespace prefix (default: a fresh one; never the shared default)")
    ap.add_argument("--runs", default="/tmp/mplab-bench-runs")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    sc = load_scenario(args.scenario)
    if "cubic" not in sc.congestion_controls:
        print("the scenario must include cubic (the baseline)", file=sys.stderr)
        return 2
    inv_doc = load_yaml_model(Inventory, scenario_inventory(sc, args.scenario)).model_dump(mode="json")
    inv_doc["emulation"]["namespace_prefix"] = args.prefix
    inv = Inventory.model_validate(inv_doc)
    sampler = BusySampler()
    sampler.start()
    t = time.monotonic()
    campaign = start_campaign(sc, inv, Path(args.runs))
    wall = time.monotonic() - t
    sampler.stop_event.set()
    stats = analyse(campaign.path, campaign.records(), sampler)
    rel = ratios(stats)
    print(f"scenario {sc.name}: {sum(s['samples_ok'] for s in stats.values())} samples ok in {wall:.0f} s "
          f"(campaign {campaign.path})")
    print(f"{'algorithm':<10}{'throughput/cubic':>18}{'(both mode)':>13}{'CPU/GB/cubic (iperf3)':>24}"
          f"{'(machine)':>11}{'failed':>8}")
    for cc in sc.congestion_controls:
        r, s = rel[cc], stats[cc]

        def f(x):
            return f"{x:.2f}" if x is not None else "-"
        print(f"{cc:<10}{f(r['agg_mbit']):>18}{f(r['agg_mbit_both']):>13}{f(r['iperf3_cpu_s_per_gb']):>24}"
              f"{f(r['busy_cpu_s_per_gb']):>11}{s['samples_failed']:>8}")
    if args.json:
        Path(args.json).write_text(json.dumps({"wall_s": wall, "stats": stats, "relative_to_cubic": rel}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
