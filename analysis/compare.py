"""A rerun beside the run before it: two campaigns of one scenario, case by case, and their manifests.

``mplab report RUN_A RUN_B`` (two campaigns of the same scenario) adds this section. Per case
(congestion control, receivers, mode or policy) and measure: both means, the difference B - A
with its Welch 95% interval over per-sample values, and a verdict: **drift** when the interval
excludes zero (the change is beyond the samples' own noise), ``within noise`` otherwise, and no
verdict with one sample on a side. Measures: per-receiver energy and the network total of
throughput (``analysis.stats``). Energies of different power profiles are not compared: a case
is matched within one energy label only.

The manifests are compared field by field over what decides a result (kernel, tool and package
versions, inventory and its digest, power profile, congestion-control implementations, commit,
sysctls); what is per campaign by nature (id, time, plan order, namespace names) is left out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.load import Source
from analysis.schemes import diff_interval
from analysis.stats import CASE_KEYS, per_sample

#: (metric, how, words, unit): what a rerun is compared on.
MEASURES = (("throughput_mbit", "total", "throughput, network total", "Mbit/s"),
            ("energy_j", "mean", "energy, per receiver", "J"))
#: Manifest fields that are per campaign by nature, never a difference worth reporting.
PER_CAMPAIGN = ("campaign", "created_at", "plan", "preflight", "parallel.names", "cluster", "interference",
                "inventory.emulation.namespace_prefix", "testbed.emulation.namespace_prefix")
#: Manifest fields a reader looks for first: listed even when equal.
KEY_FIELDS = {"kernel": "kernel", "mplab_version": "mplab version", "git.commit": "commit",
              "inventory.name": "inventory", "inventory_digest": "inventory digest",
              "inventory.emulation.power_profile.name": "power profile", "scenario_digest": "scenario digest",
              "testbed.iperf3.version": "iperf3", "testbed.energy_source": "energy source"}


@dataclass(frozen=True)
class Rerun:
    """Two campaigns of one scenario: A (the earlier given) and B."""

    a: Source
    b: Source
    scenario: str


def find_rerun(campaigns: list[Source]) -> Rerun | None:
    """The first two campaigns given that ran the same scenario (by its name), or None."""
    seen: dict[str, Source] = {}
    for c in campaigns:
        name = str(((c.campaign.manifest if c.campaign else {}).get("scenario") or {}).get("name") or "")
        if name and name in seen:
            return Rerun(seen[name], c, name)
        if name:
            seen[name] = c
    return None


def compare_cases(frame: pd.DataFrame, rerun: Rerun) -> pd.DataFrame:
    """Per case and measure: A's and B's means and n, B - A with its Welch 95% interval, the change, a verdict."""
    rows = []
    for metric, how, words, unit in MEASURES:
        ps = per_sample(frame, metric, how)
        a, b = ps[ps["campaign"] == rerun.a.name], ps[ps["campaign"] == rerun.b.name]
        for key, da in a.groupby(list(CASE_KEYS), dropna=False, sort=True):
            db = b[np.logical_and.reduce([b[k] == v for k, v in zip(CASE_KEYS, key)])]
            if db.empty:
                continue
            x, y = da[metric].to_numpy(), db[metric].to_numpy()
            lo, hi = diff_interval(y, x)
            d = float(y.mean() - x.mean())
            verdict = ("one sample on a side" if np.isnan(lo) else "within noise" if lo <= 0 <= hi else "drift")
            rows.append({**dict(zip(CASE_KEYS, key)), "measure": words, "unit": unit, "n_a": len(x),
                         "mean_a": float(x.mean()), "n_b": len(y), "mean_b": float(y.mean()), "diff": d,
                         "diff_low": lo, "diff_high": hi,
                         "change_pct": d / float(x.mean()) * 100 if x.mean() else np.nan, "verdict": verdict})
    cols = [*CASE_KEYS, "measure", "unit", "n_a", "mean_a", "n_b", "mean_b", "diff", "diff_low", "diff_high",
            "change_pct", "verdict"]
    return pd.DataFrame(rows, columns=cols)


def _flatten(doc: object, prefix: str = "") -> dict[str, str]:
    if isinstance(doc, dict):
        out: dict[str, str] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: "—" if doc is None else str(doc)}


def _skipped(key: str) -> bool:
    return any(key == p or key.startswith(p + ".") for p in PER_CAMPAIGN)


def manifest_diff(rerun: Rerun) -> pd.DataFrame:
    """The manifest fields that decide a result: every one that differs, and the key ones even when equal."""
    ma = _flatten(rerun.a.campaign.manifest if rerun.a.campaign else {})
    mb = _flatten(rerun.b.campaign.manifest if rerun.b.campaign else {})
    rows = []
    for key in sorted(set(ma) | set(mb)):
        if _skipped(key):
            continue
        va, vb = ma.get(key, "(absent)"), mb.get(key, "(absent)")
        if va != vb or key in KEY_FIELDS:
            rows.append({"field": KEY_FIELDS.get(key, key), "a": va, "b": vb,
                         "differs": "yes" if va != vb else "no"})
    df = pd.DataFrame(rows, columns=["field", "a", "b", "differs"])
    # Differences first, then the key fields that agree.
    return df.sort_values("differs", ascending=False, kind="stable").reset_index(drop=True)


def summary_line(cases: pd.DataFrame, diff: pd.DataFrame, rerun: Rerun) -> str:
    """One sentence for the console and the page."""
    drift = cases[cases["verdict"] == "drift"]
    changed = diff[diff["differs"] == "yes"]["field"].tolist()
    return (f"rerun of scenario {rerun.scenario}: {rerun.b.name} against {rerun.a.name}: {len(drift)} of {len(cases)} "
            "case measure(s) drifted beyond noise"
            + (" (" + ", ".join(f"{r.cc} N={r.n_receivers} {r.scheme} {r.measure} {r.change_pct:+.1f} %"
                                for r in drift.itertuples()) + ")"
               if len(drift) else "")
            + "; manifests differ in " + (", ".join(changed[:8]) + (" ..." if len(changed) > 8 else "")
                                         if changed else "nothing that decides a result"))


def cases_view(cases: pd.DataFrame) -> pd.DataFrame:
    """The per-case comparison as a reader sees it (three significant digits, one interval column)."""
    from analysis.tables import interval_text, sig3

    return pd.DataFrame({
        "congestion control": cases["cc"], "N (receivers)": cases["n_receivers"], "mode / policy": cases["scheme"],
        "measure": [f"{m} ({u})" for m, u in zip(cases["measure"], cases["unit"])],
        "A: mean (n)": [f"{sig3(m)} ({n})" for m, n in zip(cases["mean_a"], cases["n_a"])],
        "B: mean (n)": [f"{sig3(m)} ({n})" for m, n in zip(cases["mean_b"], cases["n_b"])],
        "B - A": [sig3(d) for d in cases["diff"]],
        "95% interval of B - A": [interval_text(lo, hi) for lo, hi in zip(cases["diff_low"], cases["diff_high"])],
        "change": [f"{c:+.1f} %" if pd.notna(c) else "–" for c in cases["change_pct"]],
        "verdict": cases["verdict"]})


def manifest_view(diff: pd.DataFrame, rerun: Rerun) -> pd.DataFrame:
    """The manifest comparison with the campaigns' names as headers."""
    return diff.rename(columns={"field": "manifest field", "a": f"A: {rerun.a.name}", "b": f"B: {rerun.b.name}"})
