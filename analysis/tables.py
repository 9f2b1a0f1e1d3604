"""Tables as a reader sees them: human headers, three significant digits, intervals in one column.

The CSVs in ``reports/<name>/tables/`` keep the raw columns (``ci_low``, ``energy_label``...) for
programs; the page shows the same numbers through ``case_view`` and friends. A table's energy
label (where its energy comes from) is said once, in its heading, not on every row: the views
come one per label.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: Raw column -> header on the page.
HEADERS = {
    "cc": "congestion control", "n_receivers": "N (receivers)", "scheme": "mode / policy",
    "receiver": "receiver", "network": "access network", "n_samples": "samples (n)", "n": "records (n)",
    "n_records": "records", "mean": "mean", "sd": "sd", "samples_failed": "failed samples",
    "records_flagged": "flagged records", "records_no_value": "records without a value",
    "samples_incomplete": "samples without every receiver", "throughput_mbit_mean": "mean",
    "throughput_mbit_sd": "sd", "bytes_share": "share of bytes", "check": "check", "claim": "claim",
    "status": "ours", "detail": "detail", "paper_status": "the paper's own values", "source": "source",
    "reason": "reason", "records": "records", "case_id": "case", "mode": "mode", "mae_j": "MAE (J)",
    "mape_pct": "MAPE (%)", "r2": "R²", "predictor": "predictor",
}
#: Counts of what was left out: shown only when some row has one.
LEFT_OUT = ("samples_failed", "records_flagged", "records_no_value", "samples_incomplete")


def sig3(x: object) -> str:
    """Three significant digits, never in exponent form (``1.296e-05`` -> ``0.000013``); ``–`` for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (bool, np.bool_)):
        return str(x)
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    v = float(x)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{round(v, -int(math.floor(math.log10(abs(v)))) + 2):,.0f}"
    return np.format_float_positional(v, precision=3, unique=False, fractional=False, trim="-")


def interval_text(lo: object, hi: object) -> str:
    """``[lo, hi]`` in three significant digits, ``–`` without an interval (one sample)."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "–"
    return f"[{sig3(lo)}, {sig3(hi)}]"


def by_label(df: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """The rows of each energy label (one table each), or the whole frame when it has no such column."""
    if "energy_label" not in df or df.empty:
        return [(None, df)]
    return [(str(label), d.drop(columns="energy_label"))
            for label, d in df.groupby("energy_label", dropna=False, sort=True)]


def case_view(df: pd.DataFrame, unit: str) -> pd.DataFrame:
    """A statistics table (``analysis.stats``) for the page: one interval column, units in the headers."""
    d = df.copy()
    mean_col = "throughput_mbit_mean" if "throughput_mbit_mean" in d else "mean"
    sd_col = "throughput_mbit_sd" if "throughput_mbit_sd" in d else "sd"
    if "ci_low" in d:
        d.insert(list(d.columns).index("ci_low"), "interval", [interval_text(a, b) for a, b in
                                                              zip(d["ci_low"], d["ci_high"])])
        d = d.drop(columns=["ci_low", "ci_high"])
    d = d.drop(columns=[c for c in LEFT_OUT if c in d and not d[c].fillna(0).astype(bool).any()])
    headers = {**HEADERS, mean_col: f"mean ({unit})", sd_col: f"sd ({unit})", "interval": f"95% interval ({unit})"}
    if "bytes_share" in d:
        d["bytes_share"] = [f"{v:.0%}" if pd.notna(v) else "–" for v in d["bytes_share"]]
    return _formatted(d).rename(columns=headers)


def plain_view(df: pd.DataFrame) -> pd.DataFrame:
    """Any other table: human headers, three significant digits."""
    return _formatted(df).rename(columns=HEADERS)


def _formatted(d: pd.DataFrame) -> pd.DataFrame:
    out = d.copy()
    for c in out.columns:
        if pd.api.types.is_numeric_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            ints = out[c].dropna().eq(out[c].dropna().round()).all() and c in HEADERS and "mean" not in c
            out[c] = [("–" if pd.isna(v) else f"{int(v):,}") if ints else sig3(v) for v in out[c]]
    return out


def analog_views(t: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The side-by-side tables as shown, one per energy label: rows = the node counts we ran, per paper
    column the paper's value beside ours (mean [95% interval], n = samples); energies also per MB
    (paper: 60 MB). The paper's other rows are in the CSV."""
    views: list[tuple[str, pd.DataFrame]] = []
    if t.empty:
        return views
    energy = "paper_j_per_mb" in t
    for label, d in t.groupby("energy_label", dropna=False, sort=True):
        if d["ours_mean"].isna().all():
            continue
        # Only the node counts we ran (every row of the paper is in the CSV): like with like.
        index = sorted(set(d.loc[d["ours_mean"].notna(), "n_receivers"]))
        d = d[d["n_receivers"].isin(index)]
        cols: dict[tuple[str, str], list[str]] = {}
        for key in dict.fromkeys(d["column"]):
            dk = d[d["column"] == key]
            name = dk["label"].iloc[0] + (" (held out)" if dk["held_out"].iloc[0] else "")
            rows = [r for _, r in dk.set_index("n_receivers").reindex(index).iterrows()]
            # The paper's values as it printed them (45.25, not 45.2): a transcription, not a measurement.
            cols[(name, "paper")] = [_cell(r["paper"], None, None, None, r.get("paper_j_per_mb") if energy else None,
                                           exact=True) for r in rows]
            cols[(name, "ours")] = [_cell(r["ours_mean"], r["ours_ci_low"], r["ours_ci_high"], r["ours_n_samples"],
                                          r.get("ours_j_per_mb") if energy else None) for r in rows]
        v = pd.DataFrame(cols, index=pd.Index(index, name="N"))
        views.append((str(label), v.reset_index()))
    return views


def _cell(mean, lo, hi, n, per_mb, exact: bool = False) -> str:
    if pd.isna(mean):
        return "–"
    s = f"{float(mean):g}" if exact else sig3(mean)
    if lo is not None and pd.notna(lo):
        s += f" {interval_text(lo, hi)}"
    if n is not None:
        s += f" n={int(n)}"
    if per_mb is not None and pd.notna(per_mb):
        s += f" ({sig3(per_mb)}/MB)"
    return s
