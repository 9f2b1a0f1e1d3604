"""The calibrated reference lab (inventory/paper-lab.yaml) against the paper's Tables 2-3.

Baseline cases of the paper with the first N receivers: WiFi and LTE single-path TCP
(cubic), MPTCP with BALIA and with Cubic. Throughput is the network total (sum of the
receivers' throughputs, Table 2 read as totals); energy is the per-node mean, scaled from
the file used here to the paper's 60 MB (the paper-lab profile has no time-proportional
term, so energy scales with bytes: ``--scale-check`` measures that). Prints paper vs
emulated per cell and the worst cell. Needs root.

    uv run python bench/paper_lab.py [--file-size 6M] [--counts 3,5,8] [--samples 1] [--scale-check]
"""
from __future__ import annotations

import argparse
import statistics

import yaml
from _common import REPO, plan, runner

from harness.config.scenario import Scenario, parse_size

PAPER_BYTES = 60_000_000
CASES = (("wifi-sptcp", "cubic", "wifi"), ("lte-sptcp", "cubic", "lte"), ("mptcp-balia", "balia", "both"),
         ("mptcp-cubic", "cubic", "both"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file-size", default="6M")
    ap.add_argument("--counts", default="3,5,8")
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--scale-check", action="store_true", help="also LTE with 3 receivers at 1/2 and 2x the file")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown (README)")
    args = ap.parse_args()
    paper = yaml.safe_load((REPO / "harness" / "data" / "paper" / "sensors-2023-7699.yaml").read_text())
    counts = [int(x) for x in args.counts.split(",")]
    file_bytes = parse_size(args.file_size)
    sc = Scenario(name="paper-lab", congestion_controls=["cubic", "balia"], receiver_counts=counts,
                  modes=["wifi", "lte", "both"], samples_per_case=args.samples, file_size=args.file_size,
                  settle_s=0.5, retries=1, transfer_timeout_s=600)
    rows = []
    scale = []
    with runner("mplab-bench-plab-", sc, REPO / "inventory" / "paper-lab.yaml") as (r, tb):
        names = tuple(x.name for x in tb.inventory.receivers)
        for n in counts:
            for col, cc, mode in CASES:
                totals, energies = [], []
                for i in range(1, args.samples + 1):
                    out = r.run_sample(plan(cc, mode, names[:n], i))
                    ok = [x for x in out.records if x["status"] == "ok"]
                    if len(ok) != n:
                        print(f"{col} N={n} sample {i}: {out.status}", [x["error"] for x in out.records])
                        continue
                    totals.append(sum(x["throughput_mbit"] for x in ok))
                    energies.append(statistics.mean(x["energy_j"] for x in ok) * PAPER_BYTES / file_bytes)
                k = paper["nodes"].index(n)
                rows.append((col, n, paper["tables"]["throughput_mbit"][col][k], statistics.mean(totals),
                             paper["tables"]["energy_j"][col][k], statistics.mean(energies)))
                print(f"{col:12} N={n}: {rows[-1][3]:6.2f} Mbit/s (paper {rows[-1][2]}), "
                      f"{rows[-1][5]:6.2f} J (paper {rows[-1][4]})", flush=True)
        if args.scale_check:
            for size in (file_bytes // 2, file_bytes * 2):
                r.scenario = sc.model_copy(update={"file_size": str(size)})
                out = r.run_sample(plan("cubic", "lte", names[:3], 99 + size % 7))
                per_byte = statistics.mean(x["energy_j"] for x in out.records) / size
                scale.append((size, per_byte))
    if args.markdown:
        print("| column | N | paper Mbit/s | emulated | ratio | paper J | emulated | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for col, n, pt, et, pe, ee in rows:
            print(f"| {col} | {n} | {pt} | {et:.1f} | {et / pt:.2f} | {pe} | {ee:.1f} | {ee / pe:.2f} |")
    else:
        print(f"{'column':12} {'N':>2} {'paper Mbit/s':>12} {'emulated':>9} {'ratio':>6} {'paper J':>8} "
              f"{'emulated':>9} {'ratio':>6}")
        for col, n, pt, et, pe, ee in rows:
            print(f"{col:12} {n:2} {pt:12.2f} {et:9.2f} {et / pt:6.3f} {pe:8.2f} {ee:9.2f} {ee / pe:6.3f}")
    worst = max(max(abs(et / pt - 1), abs(ee / pe - 1)) for _, _, pt, et, pe, ee in rows)
    print(f"worst cell: {worst:.1%} (target <= 10%)")
    by = {(c, n): ee for c, n, _, _, _, ee in rows}
    for n in counts:
        order = by[("lte-sptcp", n)] < by[("wifi-sptcp", n)] < min(by[("mptcp-balia", n)], by[("mptcp-cubic", n)])
        print(f"N={n}: LTE < WiFi < both: {order}")
    if scale:
        base = (file_bytes, by.get(("lte-sptcp", 3), 0) / PAPER_BYTES)
        for size, per_byte in [base, *scale]:
            print(f"LTE, 3 receivers, {size / 2**20:.1f} MiB: {per_byte * 1e6:.4f} J per MB")


if __name__ == "__main__":
    main()
