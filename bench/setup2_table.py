"""The reference paper's Tables 2 and 3, as measured in a Setup II campaign (markdown, for README.md).

Per congestion control and receiver count: mean per-receiver throughput (Mbit/s) and energy (J)
of each policy over ok, unflagged records; the paper's Tables 2-3 are read as per-node means
(ambiguity `table-totals` of docs/reference/ambiguities.md). Then the SDN scheme's energy saving and
throughput gain over plain MPTCP (all-both), as the paper's §1.8 computes them, and how often
Tuning adopted its assignment.

    uv run python bench/setup2_table.py runs/quick-setup2-<time>
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

COLUMNS = ("ref-is-tuned", "all-both", "all-lte", "all-wifi", "ref-is")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    args = ap.parse_args()
    recs = [json.loads(line) for line in (args.campaign / "samples.jsonl").read_text().splitlines() if line.strip()]
    thr, en = defaultdict(list), defaultdict(list)
    adopted = defaultdict(lambda: defaultdict(int))
    for r in recs:
        if not r.get("policy") or r["status"] != "ok" or r["flags"]:
            continue
        key = (r["cc"], r["n_receivers"], r["policy"])
        thr[key].append(r["throughput_mbit"])
        en[key].append(r["energy_j"])
        if r["policy"] == "ref-is-tuned" and r["receiver"] == "n1":
            adopted[(r["cc"], r["n_receivers"])][r["adopted"]] += 1
    cases = sorted({(cc, n) for cc, n, _ in thr})
    pols = [p for p in COLUMNS if any(k[2] == p for k in thr)]

    def cell(d, key, fmt="{:.1f}"):
        return fmt.format(statistics.mean(d[key])) if d.get(key) else "-"

    for title, d in (("throughput per receiver (Mbit/s)", thr), ("energy per receiver (J)", en)):
        print(f"\n{title}\n")
        print("| cc | receivers | " + " | ".join(pols) + " |")
        print("|---|---|" + "---|" * len(pols))
        for cc, n in cases:
            print(f"| {cc} | {n} | " + " | ".join(cell(d, (cc, n, p)) for p in pols) + " |")
    print("\nref-is-tuned vs all-both (the paper: about -19 % energy, +8 % throughput)\n")
    print("| cc | receivers | energy | throughput | Tuning adopted (samples) |")
    print("|---|---|---|---|---|")
    for cc, n in cases:
        a, b = (cc, n, "ref-is-tuned"), (cc, n, "all-both")
        if en.get(a) and en.get(b):
            de = statistics.mean(en[a]) / statistics.mean(en[b]) - 1
            dt = statistics.mean(thr[a]) / statistics.mean(thr[b]) - 1
            ad = ", ".join(f"{k} {v}" for k, v in sorted(adopted[(cc, n)].items()))
            print(f"| {cc} | {n} | {de:+.1%} | {dt:+.1%} | {ad} |")
    n_flagged = sum(1 for r in recs if r.get("policy") and r["flags"])
    n_failed = sum(1 for r in recs if r.get("policy") and r["status"] != "ok")
    print(f"\n{len(recs)} records, {n_failed} failed, {n_flagged} flagged (left out)")


if __name__ == "__main__":
    main()
