"""How often a receiver's second path was left underused in the both-path cells of kept campaigns.

    uv run python bench/path_share.py --reference A [--reference B ...] CAMPAIGN [CAMPAIGN ...] [--margin 0.08]

Per record of a ``both`` cell: the share of its interface bytes that went over WiFi. The reference campaigns
(S = 1, ``bench/speedup.py --keep``) give each (control, receiver count, receiver) its median share; a record
whose share lies more than ``--margin`` above it carried that much less over LTE than the receiver's usual
split (in the 2026-11-29 runs, 0.45-0.61 against 0.19-0.23, and a transfer up to twice as long). Printed per
campaign: such records, the samples holding one, and the records per congestion control; then the records.
Nothing is run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path


def records(campaign: Path) -> list[dict]:
    with (campaign / "samples.jsonl").open() as f:
        return [r for r in map(json.loads, f) if r.get("mode") == "both" and r.get("iface_bytes")
                and sum(r["iface_bytes"].values())]


def wifi_share(rec: dict) -> float:
    return rec["iface_bytes"].get("wifi", 0) / sum(rec["iface_bytes"].values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, action="append", required=True)
    ap.add_argument("--margin", type=float, default=0.08)
    ap.add_argument("campaigns", type=Path, nargs="+")
    args = ap.parse_args()
    for p in [*args.reference, *args.campaigns]:
        if not (p / "samples.jsonl").is_file():
            ap.error(f"{p}: not a kept campaign (no samples.jsonl)")
    usual: dict[tuple, list[float]] = defaultdict(list)
    for p in args.reference:
        for r in records(p):
            usual[(r["cc"], r["n_receivers"], r["receiver"])].append(wifi_share(r))
    median = {k: statistics.median(v) for k, v in usual.items()}
    print("| campaign | S | records past the margin | samples with one | per control |")
    print("|---|---|---|---|---|")
    found = []
    for p in args.campaigns:
        recs = [r for r in records(p) if (r["cc"], r["n_receivers"], r["receiver"]) in median]
        out = [r for r in recs if wifi_share(r) - median[(r["cc"], r["n_receivers"], r["receiver"])] > args.margin]
        per_cc = Counter(r["cc"] for r in out)
        impl = sorted({r.get("cc_impl", "").split("@")[0] for r in recs if r["cc"] == "cubic"})
        speed = sorted({r.get("speedup") or 1 for r in recs})
        print(f"| {p} | {', '.join(f'{s:g}' for s in speed)} | {len(out)}/{len(recs)} | "
              f"{len({r['sample_id'] for r in out})}/{len({r['sample_id'] for r in recs})} | "
              f"{dict(sorted(per_cc.items()))}{' (cubic: ' + ', '.join(impl) + ')' if impl else ''} |")
        found += [(p, r) for r in out]
    print()
    for p, r in found:
        k = (r["cc"], r["n_receivers"], r["receiver"])
        print(f"{p.name} {r['sample_id']} {r['receiver']}: WiFi share {wifi_share(r):.2f} (usual {median[k]:.2f}), "
              f"{r['duration_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
