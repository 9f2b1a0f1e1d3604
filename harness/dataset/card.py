"""The dataset card: ``datasets/<name>/README.md``, rendered with ``huggingface_hub``'s card classes.

The card data (``DatasetCardData``: license, pretty name, task, tags, size category, the
``configs`` that map each split to its Parquet file, and ``dataset_info`` with the features and
the real row counts) is built from the table and dataset.json; ``DatasetCard.from_template``
renders it as YAML front matter above the Markdown body of ``card_template.md`` (provenance,
split, per-case counts, statistics, exclusions, columns, the reference paper's citation from
``harness/data/paper/citations.yaml``). A Hugging Face user's ``datasets.load_dataset(<folder>)`` reads
the splits from that front matter.
"""
from __future__ import annotations

import json

import pandas as pd

from harness import citations
from harness.dataset.columns import COLUMN_DOCS, FLOAT_COLUMNS, INT_COLUMNS
from harness.resources import package_path

TEMPLATE = package_path("harness", "dataset", "card_template.md")
SPLITS = ("train", "test")
#: Where each split's Parquet file goes, relative to the dataset folder (the card's ``configs``).
SPLIT_FILES = {s: f"data/{s}.parquet" for s in SPLITS}


def size_category(n: int) -> str:
    """Hugging Face's ``size_categories`` bucket for ``n`` rows."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def feature_dtype(column: str) -> str:
    """The column's Hugging Face ``Value`` dtype."""
    return "int64" if column in INT_COLUMNS else "float64" if column in FLOAT_COLUMNS else "string"


def card_data(df: pd.DataFrame, meta: dict, split_bytes: dict[str, int] | None = None):
    """The card's metadata as ``DatasetCardData`` (what the YAML front matter holds)."""
    from huggingface_hub import DatasetCardData

    counts = {s: int((df["split"] == s).sum()) for s in SPLITS}
    sizes = split_bytes or {}
    present = [s for s in SPLITS if counts[s]]
    return DatasetCardData(
        license=meta.get("license") or "unknown",
        pretty_name=f"mplab {meta['name']}: MPTCP receiver energy",
        task_categories=["tabular-regression"],
        tags=["mptcp", "energy", "wifi", "lte", "mplab", *sorted(set(df["testbed_kind"]))],
        size_categories=[size_category(len(df))],
        configs=[{"config_name": "default", "default": True,
                  "data_files": [{"split": s, "path": SPLIT_FILES[s]} for s in present]}],
        dataset_info={
            "config_name": "default",
            "features": [{"name": c, "dtype": feature_dtype(c)} for c in COLUMN_DOCS],
            "splits": [{"name": s, "num_bytes": int(sizes.get(s, 0)), "num_examples": counts[s]} for s in present],
            "download_size": int(sum(sizes.values())),
            "dataset_size": int(sum(sizes.values())),
        },
        version=meta.get("version"),
    )


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _git(g: object) -> str:
    if not isinstance(g, dict):
        return "-"
    return f"{str(g.get('commit', '-'))[:12]}{' (dirty)' if g.get('dirty') else ''}"


def _split_text(df: pd.DataFrame, meta: dict) -> dict:
    sp = meta["split"]
    train_s = sorted({c["train_samples"] for c in meta["cases"]})
    test_s = sorted({c["test_samples"] for c in meta["cases"]})
    n_train = int((df["split"] == "train").sum())
    short = [c for c in meta["cases"] if (c["train_samples"], c["test_samples"]) != (sp["train"], sp["test"])]
    note = " (the reference paper's 30 + 15)" if (sp["train"], sp["test"]) == (30, 15) else ""
    if short:
        note += f"; {len(short)} of {len(meta['cases'])} case(s) had fewer samples and keep the ratio instead"
    return {"split_actual": f"{'/'.join(map(str, train_s))} train and {'/'.join(map(str, test_s))} test sample(s) "
                            f"per case ({n_train} train rows, {len(df) - n_train} test rows)",
            "split_asked": f"{sp['train']} + {sp['test']}", "split_note": note, "seed": sp["seed"]}


def _stats(df: pd.DataFrame) -> list[list[object]]:
    rows = []
    for (cc, n, mode), g in df.groupby(["cc", "n_receivers", "mode"], sort=True):
        def ms(col: str) -> str:
            s = g[col].std() if len(g) > 1 else 0.0  # noqa: B023 - called within this iteration, before the variable moves on
            return f"{_fmt(g[col].mean())} ± {_fmt(s)}"  # noqa: B023 - called within this iteration, before the variable moves on
        rows.append([cc, n, mode, len(g), ms("energy_j"), ms("throughput_mbit"), ms("wifi_throughput_mbit"),
                     ms("lte_throughput_mbit"), ms("duration_s")])
    return rows


def _transfers(sources: list[dict]) -> str:
    """What each receiver downloaded per sample, and the scenario that said so: ``60M (62914560 bytes) per
    receiver per sample (scenario paper-setup1: a, b)``, or that a campaign's manifest has no scenario."""
    by: dict[tuple, list[str]] = {}
    for s in sources:
        by.setdefault((s.get("file_size"), s.get("file_bytes"), s.get("scenario")), []).append(s["campaign"])
    parts = [f"{size} ({n} bytes) per receiver per sample (scenario `{sc}`: {', '.join(cs)})" if size else
             f"unknown: no scenario in the manifest of {', '.join(cs)}" for (size, n, sc), cs in by.items()]
    return "; ".join(parts) or "-"


def card_context(df: pd.DataFrame, meta: dict) -> dict:
    """What the Markdown body shows, as values for ``card_template.md``."""
    kinds = sorted(set(df["testbed_kind"]))
    mixed = "; ".join(f"{k}: " + ", ".join(f"{val} ({', '.join(cs)})" for val, cs in v.items())
                      for k, v in (meta.get("mixed") or {}).items())
    present = [s for s in SPLITS if (df["split"] == s).any()]
    return {
        "name": meta["name"], "digest": meta["digest"], "rows": meta["rows"], "created_at": meta["created_at"],
        "mplab_version": meta["mplab_version"], "schema_version": meta["schema_version"],
        "version": meta.get("version", "-"), "url": meta.get("url", "-"),
        "summary": (f"Energy and throughput of dual-homed (WiFi + LTE) receivers downloading one file over MPTCP "
                    f"or single-path TCP, one row per receiver per sample, from {len(meta['sources'])} mplab "
                    f"campaign(s) on the {', '.join(kinds)} testbed."),
        "transfers": _transfers(meta["sources"]),
        "kinds": kinds, "sources": sorted(set(df["energy_source"])), "meters": sorted(set(df["meter_kind"])),
        "kernels": sorted(set(str(k) for k in df["kernel"])),
        "energy": meta.get("energy") or "energy_j over the transfer window (tails not separated)",
        "mixed": mixed, "emulated": "emulated" in kinds, "load_path": f"datasets/{meta['name']}",
        "split_names": present,
        "provenance": [{"campaign": s["campaign"], "testbed": s["testbed_kind"], "kernel": s.get("kernel") or "-",
                        "inventory": s["inventory_digest"], "scenario": s["scenario_digest"], "git": _git(s.get("git"))}
                       for s in meta["sources"]],
        "profiles": [{"campaign": s["campaign"], "profile": json.dumps(s["power_profile"], sort_keys=True)}
                     for s in meta["sources"] if s.get("power_profile")],
        **_split_text(df, meta), "keep_flagged": "yes" if meta["keep_flagged"] else "no", "cases": meta["cases"],
        "stats": _stats(df), "excluded": list(meta["excluded"].items()),
        "columns": [{"name": c, "dtype": feature_dtype(c), "unit": u or "-", "description": d}
                    for c, (u, d) in COLUMN_DOCS.items()],
        "reference": citations.reference(),
    }


def render_card(df: pd.DataFrame, meta: dict, split_bytes: dict[str, int] | None = None) -> str:
    """README.md: ``DatasetCard.from_template`` over the card data and ``card_template.md``."""
    from huggingface_hub import DatasetCard

    card = DatasetCard.from_template(card_data(df, meta, split_bytes), template_path=str(TEMPLATE),
                                     **card_context(df, meta))
    return str(card)
