"""Per-case statistics: mean, spread and a 95% confidence interval, with what was left out counted.

The unit of replication is the **sample** (one transfer to all receivers of a case): the
receivers of one sample share a cell, an AP and a moment, so they are not independent. A case's
value per sample is the mean over that sample's usable receivers (a per-node average, as the
reference paper's tables read); the case mean, standard deviation and confidence interval are
over those per-sample values. Samples are few (2-45), so the interval is Student's t (default)
or a percentile bootstrap, never a normal one. Per-receiver tables use each receiver's own
records (one per sample) instead.

**Per receiver or network total.** ``case_stats(..., how="mean")`` gives the per-receiver mean
(a sample's value is the mean over its receivers); ``how="total"`` the network total (a sample's
value is the *sum* over its receivers, the way the reference paper's Table 2 reads, see
``harness/emulation/calibration.py``). A total needs every receiver of the sample: a sample with a
failed or flagged receiver has no total and is counted in ``samples_incomplete``.

**Bounds.** Throughput, energy and power cannot be negative. With 2-3 samples a Student t
interval can reach below zero; its lower end is then truncated at 0 (``BOUND_TEXT``, stated with
every interval). A percentile bootstrap of non-negative values never goes below 0 by itself.

A record is *usable* when its sample and its receiver are ``ok``, it carries no data-quality
flag, and the value exists. Everything else is counted per case: failed samples, flagged
records, records without the value. Nothing is dropped silently.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

CASE_KEYS = ("energy_label", "cc", "n_receivers", "scheme")
UNITS = {"energy_j": "J", "throughput_mbit": "Mbit/s", "mean_power_w": "W", "duration_s": "s",
         "tail_energy_j": "J"}
CI_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class CiMethod:
    """How intervals are computed (stated in every table and the report)."""

    name: str
    text: str


BOUND_TEXT = "lower ends truncated at 0 (throughput, energy and power cannot be negative)"
CI_METHODS = {
    "t": CiMethod("t", "95% Student t interval over per-sample values (a sample's value is the mean over its "
                       f"usable receivers, or their sum for network totals), {BOUND_TEXT}; n = samples"),
    "bootstrap": CiMethod("bootstrap", f"95% percentile bootstrap ({BOOTSTRAP_RESAMPLES:,} resamples, seed 0) "
                                       "over per-sample values (the mean over a sample's usable receivers, or "
                                       f"their sum for network totals), {BOUND_TEXT}; n = samples"),
}
#: What a sample's value is: the mean over its receivers, or their sum (a network total).
HOW = ("mean", "total")


def usable(frame: pd.DataFrame, metric: str) -> pd.Series:
    """Records that count: sample and receiver ok, no flag, a value for ``metric``."""
    return ((frame["sample_status"] == "ok") & (frame["status"] == "ok") & (frame["flags"].fillna("") == "")
            & frame[metric].notna())


def interval(values: np.ndarray, method: str = "t", lower: float | None = None) -> tuple[float, float, float, float]:
    """(mean, standard deviation, CI low, CI high) of ``values``; NaN where n is too small.

    ``lower``: the quantity's lower bound (0 for throughput, energy, power); the interval's low end
    is truncated there (``BOUND_TEXT``).
    """
    mean, sd, lo, hi = _interval(values, method)
    if lower is not None and not np.isnan(lo):
        lo = max(lo, lower)
    return mean, sd, lo, hi


def _interval(values: np.ndarray, method: str) -> tuple[float, float, float, float]:
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n == 0:
        return (np.nan,) * 4
    mean = float(v.mean())
    if n < 2:
        return mean, np.nan, np.nan, np.nan
    sd = float(v.std(ddof=1))
    if method == "t":
        half = float(sps.t.ppf(0.5 + CI_LEVEL / 2, n - 1)) * sd / np.sqrt(n)
        return mean, sd, mean - half, mean + half
    if method == "bootstrap":
        rng = np.random.default_rng(0)
        means = v[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
        lo, hi = np.quantile(means, [(1 - CI_LEVEL) / 2, 0.5 + CI_LEVEL / 2])
        return mean, sd, float(lo), float(hi)
    raise ValueError(f"unknown CI method {method!r} (expected one of {sorted(CI_METHODS)})")


def per_sample(frame: pd.DataFrame, metric: str, how: str = "mean") -> pd.DataFrame:
    """One row per usable sample: the case keys, campaign, sample_id and ``metric`` over its receivers.

    ``how="mean"``: the mean over the sample's usable receivers. ``how="total"``: their sum, only for
    samples whose every receiver is usable (``n_receivers`` of them); others have no total.
    """
    f = frame[usable(frame, metric)]
    keys = [*CASE_KEYS, "campaign", "sample_id"]
    g = f.groupby(keys, dropna=False, sort=True)[metric]
    if how == "mean":
        return g.mean().reset_index()
    if how != "total":
        raise ValueError(f"unknown aggregation {how!r} (expected one of {HOW})")
    out = g.agg(["sum", "count"]).reset_index()
    out = out[out["count"] == out["n_receivers"]]
    return out.drop(columns="count").rename(columns={"sum": metric}).reset_index(drop=True)


def _excluded_counts(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    f = frame.assign(
        _failed_sample=frame["sample_status"] != "ok",
        _flagged=(frame["sample_status"] == "ok") & (frame["status"] == "ok") & (frame["flags"].fillna("") != ""),
        _no_value=(frame["sample_status"] == "ok") & (frame["status"] == "ok") & (frame["flags"].fillna("") == "")
        & frame[metric].isna(),
    )
    g = f.groupby(list(CASE_KEYS), dropna=False, sort=True)
    failed = g.apply(lambda d: d.loc[d["_failed_sample"], ["campaign", "sample_id"]].drop_duplicates().shape[0],
                     include_groups=False)
    return pd.DataFrame({"samples_failed": failed, "records_flagged": g["_flagged"].sum(),
                         "records_no_value": g["_no_value"].sum()}).reset_index()


def case_stats(frame: pd.DataFrame, metric: str, method: str = "t", how: str = "mean",
               lower: float | None = 0.0) -> pd.DataFrame:
    """Per case (energy label, cc, receivers, mode or policy): n, mean, sd, CI and the exclusions.

    Args:
        frame: the tidy frame of ``analysis.load``.
        metric: a numeric column (``energy_j``, ``throughput_mbit``, ``mean_power_w``...).
        method: ``t`` or ``bootstrap`` (``CI_METHODS``).
        how: ``mean`` (per receiver) or ``total`` (the sum over a sample's receivers: a network total).
        lower: the quantity's lower bound (intervals truncated there); None for none.

    Returns:
        One row per case that has any record, usable or not, sorted by the case keys. With
        ``how="total"``, ``samples_incomplete`` counts usable samples left out for a missing receiver.
    """
    cols = [*CASE_KEYS, "n_samples", "n_records", "mean", "sd", "ci_low", "ci_high",
            "samples_failed", "records_flagged", "records_no_value", "samples_incomplete"]
    if frame.empty:
        return pd.DataFrame(columns=cols)
    ps = per_sample(frame, metric, how)
    rec_n = frame[usable(frame, metric)].groupby(list(CASE_KEYS), dropna=False).size().rename("n_records")
    any_n = per_sample(frame, metric).groupby(list(CASE_KEYS), dropna=False).size().rename("_any")
    rows = []
    for key, d in ps.groupby(list(CASE_KEYS), dropna=False, sort=True):
        mean, sd, lo, hi = interval(d[metric].to_numpy(), method, lower)
        rows.append({**dict(zip(CASE_KEYS, key)), "n_samples": len(d), "mean": mean, "sd": sd,
                     "ci_low": lo, "ci_high": hi})
    stats = pd.DataFrame(rows, columns=[*CASE_KEYS, "n_samples", "mean", "sd", "ci_low", "ci_high"])
    out = _excluded_counts(frame, metric).merge(stats, on=list(CASE_KEYS), how="left")
    out = out.merge(rec_n.reset_index(), on=list(CASE_KEYS), how="left")
    out = out.merge(any_n.reset_index(), on=list(CASE_KEYS), how="left")
    out[["n_samples", "n_records", "_any"]] = out[["n_samples", "n_records", "_any"]].fillna(0).astype(int)
    out["samples_incomplete"] = out["_any"] - out["n_samples"]
    out["n_receivers"] = out["n_receivers"].astype(int)
    return out[cols].sort_values(list(CASE_KEYS), kind="stable").reset_index(drop=True)


def receiver_stats(frame: pd.DataFrame, metric: str, method: str = "t", lower: float | None = 0.0) -> pd.DataFrame:
    """Per case and receiver: n (its usable records, one per sample), mean, sd, CI (truncated at ``lower``)."""
    f = frame[usable(frame, metric)]
    rows = []
    for key, d in f.groupby([*CASE_KEYS, "receiver"], dropna=False, sort=True):
        mean, sd, lo, hi = interval(d[metric].to_numpy(), method, lower)
        rows.append({**dict(zip([*CASE_KEYS, "receiver"], key)), "n": len(d), "mean": mean, "sd": sd,
                     "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=[*CASE_KEYS, "receiver", "n", "mean", "sd", "ci_low", "ci_high"])


def network_stats(frame: pd.DataFrame, method: str = "t") -> pd.DataFrame:
    """Per case and access network (WiFi, LTE): per-interface throughput (mean, CI) and share of bytes."""
    rows = []
    for net in ("wifi", "lte"):
        col = f"{net}_throughput_mbit"
        f = frame[usable(frame, col)]
        ps = f.groupby([*CASE_KEYS, "campaign", "sample_id"], dropna=False)[[col, "wifi_bytes", "lte_bytes"]].agg(
            {col: "mean", "wifi_bytes": "sum", "lte_bytes": "sum"}).reset_index()
        for key, d in ps.groupby(list(CASE_KEYS), dropna=False, sort=True):
            mean, sd, lo, hi = interval(d[col].to_numpy(), method, 0.0)
            total = float(d["wifi_bytes"].sum() + d["lte_bytes"].sum())
            share = float(d[f"{net}_bytes"].sum()) / total if total > 0 else np.nan
            rows.append({**dict(zip(CASE_KEYS, key)), "network": net, "n_samples": len(d),
                         "throughput_mbit_mean": mean, "throughput_mbit_sd": sd, "ci_low": lo, "ci_high": hi,
                         "bytes_share": share})
    cols = [*CASE_KEYS, "network", "n_samples", "throughput_mbit_mean", "throughput_mbit_sd", "ci_low", "ci_high",
            "bytes_share"]
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values([*CASE_KEYS, "network"], kind="stable").reset_index(drop=True)


def exclusion_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Records left out of the energy statistics, by reason (what the report lists up front)."""
    reasons = np.where(frame["sample_status"] != "ok", "sample failed",
                       np.where(frame["status"] != "ok", "receiver failed",
                                np.where(frame["flags"].fillna("") != "",
                                         "flagged: " + frame["flags"].fillna("").str.split(";").str[0]
                                         .str.split(":").str[0].str.strip(),
                                         np.where(frame["energy_j"].isna(), "no energy", ""))))
    s = pd.Series(reasons, index=frame.index)
    s = s[s != ""]
    out = s.groupby([frame.loc[s.index, "source"], s]).size().rename("records").reset_index()
    out.columns = ["source", "reason", "records"]
    return out
