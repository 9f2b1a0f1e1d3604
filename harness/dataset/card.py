"""The dataset card: ``datasets/<name>/README.md``, rendered from the table and dataset.json."""
from __future__ import annotations

import json

import pandas as pd


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _git(g: object) -> str:
    if not isinstance(g, dict):
        return "-"
    return f"{str(g.get('commit', '-'))[:12]}{' (dirty)' if g.get('dirty') else ''}"


def render_card(df: pd.DataFrame, meta: dict) -> str:
    """Markdown card: provenance, split, per-case counts, summary statistics, exclusions."""
    kinds = sorted(set(df["testbed_kind"]))
    sources = sorted(set(df["energy_source"]))
    meters = sorted(set(df["meter_kind"]))
    emulated = "emulated" in kinds
    out = [f"# Dataset `{meta['name']}`", ""]
    out.append(f"- digest: `{meta['digest']}` (sha256 of `data.csv`)")
    out.append(f"- rows: {meta['rows']} (one per receiver per sample); built {meta['created_at']} by mplab "
               f"{meta['mplab_version']}; schema_version {meta['schema_version']}")
    out.append(f"- testbed: {', '.join(kinds)}; energy: {', '.join(sources)}; meters: {', '.join(meters)}; "
               f"kernels: {', '.join(sorted(set(str(k) for k in df['kernel'])))}")
    out.append(f"- energy: {meta.get('energy') or 'energy_j over the transfer window (tails not separated)'}")
    if meta.get("mixed"):
        out.append("- **mixed campaigns** (built with --allow-mixed): " + "; ".join(
            f"{k}: " + ", ".join(f"{val} ({', '.join(cs)})" for val, cs in v.items())
            for k, v in meta["mixed"].items()))
    if emulated:
        out.append("- **emulated data**: energy comes from emulated meters driven by a power profile "
                   "(base + per-interface θ + b·throughput, LTE tail), not from radios; do not compare "
                   "its joules with lab measurements.")
    out += ["", "## Provenance", ""]
    out.append(_table(["campaign", "testbed", "kernel", "inventory digest", "scenario digest", "git commit"],
                      [[s["campaign"], s["testbed_kind"], s.get("kernel") or "-", f"`{s['inventory_digest']}`",
                        f"`{s['scenario_digest']}`", _git(s.get("git"))] for s in meta["sources"]]))
    for s in meta["sources"]:
        if s.get("power_profile"):
            out.append(f"\nPower profile of `{s['campaign']}` (emulated meters): `{json.dumps(s['power_profile'], sort_keys=True)}`")
    sp = meta["split"]
    out += ["", "## Split", "",
            f"Per case and per sample (every receiver of a sample is in the same split): {sp['train']} train and "
            f"{sp['test']} test samples per case (the paper's 30 + 15); samples are ordered by "
            f"sha256(\"{sp['seed']}:<sample_id>\"). A case with fewer samples keeps the ratio; samples beyond "
            "train + test are spare (not in the table). Flagged records kept: "
            f"{'yes' if meta['keep_flagged'] else 'no'}.", ""]
    out.append(_table(["cc", "receivers", "mode", "train samples", "test samples", "train rows", "test rows"],
                      [[c["cc"], c["n_receivers"], c["mode"], c["train_samples"], c["test_samples"], c["train_rows"],
                        c["test_rows"]] for c in meta["cases"]]))
    out += ["", "## Summary statistics", "", "Per case, over all rows: mean ± standard deviation.", ""]
    rows = []
    for (cc, n, mode), g in df.groupby(["cc", "n_receivers", "mode"], sort=True):
        def ms(col: str) -> str:
            s = g[col].std() if len(g) > 1 else 0.0
            return f"{_fmt(g[col].mean())} ± {_fmt(s)}"
        rows.append([cc, n, mode, len(g), ms("energy_j"), ms("throughput_mbit"), ms("wifi_throughput_mbit"),
                     ms("lte_throughput_mbit"), ms("duration_s")])
    out.append(_table(["cc", "receivers", "mode", "rows", "energy J", "throughput Mbit/s", "WiFi Mbit/s",
                       "LTE Mbit/s", "duration s"], rows))
    out += ["", "## Excluded records", ""]
    if meta["excluded"]:
        out.append(_table(["reason", "records"], [[k, v] for k, v in meta["excluded"].items()]))
    else:
        out.append("None.")
    out += ["", "## Files", "",
            "- `data.parquet`, `data.csv`: the table (columns documented in docs/dataset.md)",
            "- `schema.json`: JSON Schema of a row", "- `dataset.json`: everything on this card, machine-readable", ""]
    return "\n".join(out)
