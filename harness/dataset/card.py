"""The dataset card: ``datasets/<name>/README.md``, rendered from the table and dataset.json.

YAML front matter as Hugging Face dataset cards have it (license, pretty name, task, tags, size
category, data files, splits with their real row counts, citation of the reference paper), then
Markdown for people.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd
import yaml

PAPER = Path("data") / "paper" / "sensors-2023-7699.yaml"  # in the repository, beside harness/


@functools.cache
def reference_citation() -> dict | None:
    """The reference paper's citation as mplab records it (``data/paper/sensors-2023-7699.yaml``), or None.

    Only what that file says: it has no title or authors, and none are made up here.
    """
    found = [d / PAPER for d in Path(__file__).resolve().parents if (d / PAPER).is_file()]
    if not found:  # an installed wheel carries no data/ folder
        return None
    c = yaml.safe_load(found[0].read_text()).get("citation") or {}
    if not c:
        return None
    return {"key": c.get("key"), "text": " ".join(str(c.get("text", "")).split()), "journal": c.get("journal"),
            "volume": c.get("volume"), "article": c.get("article"), "year": c.get("year")}


def size_category(n: int) -> str:
    """Hugging Face's ``size_categories`` bucket for ``n`` rows."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def front_matter(df: pd.DataFrame, meta: dict) -> dict:
    """The card's YAML header."""
    from harness.dataset.columns import COLUMN_DOCS, FLOAT_COLUMNS, INT_COLUMNS

    cite = reference_citation()
    dtype = {**{c: "int64" for c in INT_COLUMNS}, **{c: "float64" for c in FLOAT_COLUMNS}}
    splits = {s: int((df["split"] == s).sum()) for s in ("train", "test")}
    return {
        "license": meta.get("license") or "unknown",
        "pretty_name": f"mplab {meta['name']}: MPTCP receiver energy",
        "task_categories": ["tabular-regression"],
        "tags": ["mptcp", "energy", "wifi", "lte", "mplab", *sorted(set(df["testbed_kind"]))],
        "size_categories": [size_category(len(df))],
        "configs": [{"config_name": "default", "data_files": "data.parquet"}],
        "dataset_info": {
            "features": [{"name": c, "dtype": dtype.get(c, "string"), "description": COLUMN_DOCS[c][1],
                          **({"unit": COLUMN_DOCS[c][0]} if COLUMN_DOCS[c][0] else {})} for c in COLUMN_DOCS],
            "splits": [{"name": s, "num_examples": n, "column": "split"} for s, n in splits.items()],
            "dataset_size": int(len(df)),
        },
        **({"citation": cite} if cite else {}),
    }


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
    head = "---\n" + yaml.safe_dump(front_matter(df, meta), sort_keys=False, allow_unicode=True) + "---\n\n"
    out = [f"# Dataset `{meta['name']}`", ""]
    out.append(f"- digest: `{meta['digest']}` (sha256 of `data.csv`; `SHA256SUMS` covers every file)")
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
    train_s = sorted({c["train_samples"] for c in meta["cases"]})
    test_s = sorted({c["test_samples"] for c in meta["cases"]})
    n_train = int((df["split"] == "train").sum())
    actual = (f"{'/'.join(map(str, train_s))} train and {'/'.join(map(str, test_s))} test sample(s) per case "
              f"({n_train} train rows, {len(df) - n_train} test rows)")
    asked = f"{sp['train']} + {sp['test']}"
    short = [c for c in meta["cases"] if (c["train_samples"], c["test_samples"]) != (sp["train"], sp["test"])]
    out += ["", "## Split", "",
            f"This dataset has {actual}. It was built asking for {asked} per case"
            + (" (the reference paper's 30 + 15)" if (sp["train"], sp["test"]) == (30, 15) else "")
            + (f"; {len(short)} of {len(meta['cases'])} case(s) had fewer samples and keep the ratio instead"
               if short else "") + ".",
            "",
            f"The split is per case and per sample (every receiver of a sample is in the same split); samples are "
            f"ordered by sha256(\"{sp['seed']}:<sample_id>\"). Samples beyond train + test are spare (not in the "
            f"table). Flagged records kept: {'yes' if meta['keep_flagged'] else 'no'}.", ""]
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
    from harness.dataset.columns import COLUMN_DOCS

    out += ["", "## Columns", "",
            _table(["column", "unit", "description"], [[f"`{c}`", u or "-", d] for c, (u, d) in COLUMN_DOCS.items()])]
    out += ["", "## Files", "",
            "- `data.parquet` (text columns categorical; each field carries its unit and description as metadata), "
            "`data.csv`: the same table",
            "- `schema.json`: JSON Schema of a row", "- `dataset.json`: everything on this card, machine-readable",
            "- `croissant.json`: Croissant 1.0 metadata (JSON-LD)",
            "- `SHA256SUMS`: sha256 of every file (`sha256sum -c SHA256SUMS`)", ""]
    cite = reference_citation()
    if cite:
        out += ["## Citation", "", f"The reference paper these experiments follow: {cite['text']}", ""]
    return head + "\n".join(out)
