"""Configured vs achieved rate on the emulated testbed, per path and for MPTCP aggregates.

Each receiver of inventory/emulated.yaml alone, in each mode (wifi, lte: one path; both:
MPTCP over both, configured = sum of the two channel rates), then all nine receivers at
once on one access network (configured = the AP's or the cell's shared capacity).
Prints achieved/configured ratios measured in this one run. Needs root.

    uv run python bench/fidelity.py [--file-size 3M]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from _common import plan, runner

from harness.config.scenario import Scenario


def shared_rate(records: list[dict], raw: Path) -> float:
    """Aggregate Mbit/s while every receiver was active, from iperf3's per-second intervals.

    Averaging over first start to last finish would count the time when only the slowest
    receivers are left and the shared capacity is no longer the bottleneck.
    """
    spans = [(r["window_start"], r["window_end"]) for r in records]
    w0, w1 = max(s for s, _ in spans), min(e for _, e in spans)
    bits = 0.0
    for r in records:
        doc = json.loads((raw / f"iperf3-{r['receiver']}.json").read_text())
        for iv in doc["intervals"]:
            s = iv["sum"]
            a, b = r["window_start"] + s["start"], r["window_start"] + s["end"]
            overlap = max(0.0, min(b, w1) - max(a, w0))
            if overlap > 0 and b > a:
                bits += s["bytes"] * 8 * overlap / (b - a)
    return bits / (w1 - w0) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file-size", default="4M")
    ap.add_argument("--cc", default="cubic")
    args = ap.parse_args()
    sc = Scenario(name="fidelity", congestion_controls=[args.cc], receiver_counts=[1], modes=["wifi", "lte", "both"],
                  samples_per_case=1, file_size=args.file_size, settle_s=0, retries=1)
    rows = []
    with runner("mplab-bench-fid-", sc) as (r, tb):
        inv = tb.inventory
        emu = inv.emulation
        for i, rx in enumerate(inv.receivers, start=1):
            w = rx.interfaces["wifi"].channel.rate_mbit
            lte = rx.interfaces["lte"].channel.rate_mbit
            want = {"wifi": min(w, emu.wifi_ap.capacity_mbit), "lte": min(lte, emu.lte_cell.capacity_mbit)}
            want["both"] = want["wifi"] + want["lte"]
            for mode in ("wifi", "lte", "both"):
                out = r.run_sample(plan(args.cc, mode, (rx.name,), 1))
                got = out.records[0]["throughput_mbit"] or 0.0
                rows.append((rx.name, mode, want[mode], got))
        names = tuple(x.name for x in inv.receivers)
        for mode, cap in (("wifi", emu.wifi_ap.capacity_mbit), ("lte", emu.lte_cell.capacity_mbit)):
            p = plan(args.cc, mode, names, 2)
            out = r.run_sample(p)
            raw = r.campaign.path / "raw" / p.sample_id / f"attempt-{out.attempts}"
            rows.append((f"all {len(names)}", f"{mode} shared", cap, shared_rate(out.records, raw)))
    print(f"{'receiver':10} {'mode':12} {'configured':>10} {'achieved':>9} {'ratio':>6}")
    for name, mode, want, got in rows:
        print(f"{name:10} {mode:12} {want:10.2f} {got:9.2f} {got / want:6.3f}")
    for mode in ("wifi", "lte", "both"):
        ratios = [g / w for _, m, w, g in rows if m == mode]
        print(f"median ratio {mode:5}: {statistics.median(ratios):.3f}  (min {min(ratios):.3f}, max {max(ratios):.3f})")
    for mode in ("wifi shared", "lte shared"):
        print(f"ratio {mode}: " + ", ".join(f"{g / w:.3f}" for _, m, w, g in rows if m == mode))


if __name__ == "__main__":
    main()
