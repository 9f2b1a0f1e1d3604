"""The reference paper's Tables 2-3 beside ours, and the reproduction checks.

The paper's numbers live in ``harness/data/paper/sensors-2023-7699.yaml`` (transcribed exactly, with
the citation and a column mapping). A paper column is matched to our cases by its congestion
control and either its **policy** (records of a Setup II campaign carry ``policy``) or, for the
columns that are not held out, its interface **mode** (Setup I: ``mptcp-balia`` is balia over
``both``, ``lte-sptcp`` is cubic over ``lte``). A policy match wins over a mode match.

The checks (docs/reference/papers.md §1.8) are written once, over a wide table
(node count x paper column -> mean), and run on the paper's own values (they all pass there:
a check that the paper fails would be wrong) and on ours:

- ``energy-ordering``: at every node count, the policies' energies keep the paper's order
  (SDN < LTE-only < WiFi-only < MPTCP-both; the order is read from the paper's values);
- ``energy-flat``: per column, energy varies by at most 10% over the node counts;
- ``throughput-decreasing``: per column, throughput at the largest node count is below the
  smallest, and never rises significantly from one count to the next (95% intervals apart);
- ``sdn-mptcp-ratio``: per congestion control and node count, SDN energy / MPTCP energy is
  within 0.05 of 0.8 (the paper: 0.805-0.817).

A check without the data it needs says ``n/a`` and why; it never passes by default.

**Like with like.** The paper does not say how its tables read; mplab reads Table 2 as network
totals (the sum of a run's receivers' throughputs) and Table 3 as per-node means, as the
calibration does (``harness/emulation/calibration.py`` gives the reasons). The data file's
``readings`` says so, and ``analog_table`` is given our values in the same reading: per-sample
sums of the receivers' throughputs beside Table 2, per-receiver means beside Table 3.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import ConfigError
from harness.resources import paper_file

PAPER_FILE = paper_file("sensors-2023-7699.yaml")
FLAT_TOLERANCE = 0.10
RATIO_TARGET, RATIO_TOLERANCE = 0.8, 0.05
METRICS = {"throughput_mbit": ("Table 2", "throughput", "Mbit/s"), "energy_j": ("Table 3", "energy", "J")}


class PaperColumn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    policy: str
    cc: str
    mode: str
    held_out: bool
    #: The paper does not name this column's congestion control; ``cc`` is mplab's matching choice.
    cc_assumed: bool = False


class PaperTables(BaseModel):
    """The data file: citation, column mapping and Tables 2-3 (one value per node count)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    schema_version: int
    citation: dict
    notes: str = ""
    file_size: str
    nodes: list[int]
    columns: dict[str, PaperColumn]
    tables: dict[str, dict[str, list[float]]]
    # How each table reads: ``total`` (summed over a run's receivers) or ``per_node`` (their mean).
    readings: dict[str, Literal["total", "per_node"]] = {"throughput_mbit": "total", "energy_j": "per_node"}

    def how(self, metric: str) -> str:
        """``case_stats``'s ``how`` that gives our values in the paper's reading of ``metric``."""
        return "total" if self.readings.get(metric) == "total" else "mean"

    @property
    def file_mb(self) -> float:
        """The paper's file size in MB (its words: "60 MB")."""
        return float(self.file_size.split()[0])

    def wide(self, metric: str) -> pd.DataFrame:
        """Node count x column -> the paper's value."""
        return pd.DataFrame(self.tables[metric], index=pd.Index(self.nodes, name="n_receivers"))

    @property
    def citation_text(self) -> str:
        return " ".join(str(self.citation.get("text", "")).split())


def load_paper(path: Path = PAPER_FILE) -> PaperTables:
    """Read and check the paper's data file (``ConfigError`` naming it otherwise)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
        paper = PaperTables.model_validate(doc)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the paper's tables: {' '.join(str(exc).split())}", source=str(path)) from None
    except ValidationError as exc:
        raise ConfigError(f"malformed paper tables: {exc.errors()[0]['msg']}", source=str(path),
                          field=".".join(map(str, exc.errors()[0]["loc"]))) from None
    for metric, cols in paper.tables.items():
        for col, vals in cols.items():
            if col not in paper.columns or len(vals) != len(paper.nodes):
                raise ConfigError(f"column {col!r} is unknown or has {len(vals)} values for {len(paper.nodes)} "
                                  "node counts", source=str(path), field=f"tables.{metric}")
    return paper


def column_label(key: str) -> str:
    """``mptcp-balia`` -> ``MPTCP BALIA``, ``lte-sptcp`` -> ``LTE SPTCP``."""
    return " ".join(p.upper() for p in key.split("-"))


def match_cases(paper: PaperTables, stats: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``stats`` (``analysis.stats.case_stats``) that stand for a paper column, with ``column`` added."""
    parts = []
    for key, col in paper.columns.items():
        by_policy = stats[(stats["scheme"] == col.policy) & (stats["cc"] == col.cc)]
        by_mode = (stats[(stats["scheme"] == col.mode) & (stats["cc"] == col.cc)] if not col.held_out
                   else stats.iloc[0:0])
        # A policy match wins per (energy label, node count): Setup II over Setup I.
        have = set(zip(by_policy["energy_label"], by_policy["n_receivers"]))
        by_mode = by_mode[[(e, n) not in have for e, n in zip(by_mode["energy_label"], by_mode["n_receivers"])]]
        parts.append(pd.concat([by_policy, by_mode]).assign(column=key))
    return pd.concat(parts, ignore_index=True) if parts else stats.assign(column=[])


def analog_table(paper: PaperTables, stats: pd.DataFrame, metric: str, file_bytes: float | None) -> pd.DataFrame:
    """Tables 2-3 analog: per energy label, paper column and node count, the paper's value beside ours.

    ``file_bytes`` (our transfer size) adds per-MB columns to the energy table, since the paper moved 60 MB.
    """
    m = match_cases(paper, stats)
    pw = paper.wide(metric)
    labels = sorted(set(m["energy_label"])) or [None]
    rows = []
    for label in labels:
        ml = m[m["energy_label"] == label] if label is not None else m
        for key in paper.columns:
            ours = ml[ml["column"] == key].set_index("n_receivers")
            for n in sorted(set(paper.nodes) | set(ours.index)):
                o = ours.loc[n] if n in ours.index else None
                row = {"energy_label": label, "column": key, "label": column_label(key),
                       "held_out": paper.columns[key].held_out, "n_receivers": int(n),
                       "paper": float(pw.at[n, key]) if n in pw.index and key in pw.columns else np.nan,
                       "ours_mean": o["mean"] if o is not None else np.nan,
                       "ours_ci_low": o["ci_low"] if o is not None else np.nan,
                       "ours_ci_high": o["ci_high"] if o is not None else np.nan,
                       "ours_n_samples": int(o["n_samples"]) if o is not None else 0}
                if metric == "energy_j":
                    row["paper_j_per_mb"] = row["paper"] / paper.file_mb
                    row["ours_j_per_mb"] = row["ours_mean"] / (file_bytes / 1e6) if file_bytes else np.nan
                rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Check:
    """One reproduction check: ``pass``, ``fail`` or ``n/a``, with what decided it."""

    name: str
    claim: str
    status: str
    detail: str


def _wide(table: pd.DataFrame, value: str) -> pd.DataFrame:
    t = table.dropna(subset=[value])
    if t.empty:
        return pd.DataFrame()
    return t.pivot_table(index="n_receivers", columns="column", values=value, aggfunc="first").sort_index()


def policy_order(paper: PaperTables) -> list[str]:
    """Policies from cheapest to dearest by the paper's mean energy (SDN, LTE, WiFi, MPTCP)."""
    e = paper.wide("energy_j").mean()
    by_policy: dict[str, list[float]] = {}
    for key, v in e.items():
        by_policy.setdefault(paper.columns[key].policy, []).append(float(v))
    return sorted(by_policy, key=lambda p: np.mean(by_policy[p]))


def check_energy_ordering(paper: PaperTables, energy: pd.DataFrame) -> Check:
    """At every node count, each policy's columns cost less than every column of a dearer policy."""
    claim = "energy order " + " < ".join(policy_order(paper)) + " at every node count"
    rank = {p: i for i, p in enumerate(policy_order(paper))}
    compared, broken = 0, []
    for n, row in energy.iterrows():
        cols = [c for c in row.index if pd.notna(row[c])]
        for a in cols:
            for b in cols:
                ra, rb = rank[paper.columns[a].policy], rank[paper.columns[b].policy]
                if ra < rb:
                    compared += 1
                    if not row[a] < row[b]:
                        broken.append(f"N={n}: {a} {row[a]:.3g} >= {b} {row[b]:.3g}")
    if compared == 0:
        return Check("energy-ordering", claim, "n/a", "needs two policies/modes of the paper at one node count")
    if broken:
        return Check("energy-ordering", claim, "fail", f"{len(broken)} of {compared} pairs out of order: "
                     + "; ".join(broken[:4]) + (" ..." if len(broken) > 4 else ""))
    return Check("energy-ordering", claim, "pass", f"{compared} pairs in order")


def check_energy_flat(energy: pd.DataFrame) -> Check:
    """Per column: (max - min) / min of the energy over node counts within 10%."""
    claim = f"energy flat in the node count (within {FLAT_TOLERANCE:.0%})"
    spans, bad = [], []
    for col in energy.columns:
        v = energy[col].dropna()
        if len(v) < 2:
            continue
        span = (v.max() - v.min()) / v.min()
        spans.append(f"{col} {span:+.1%}")
        if span > FLAT_TOLERANCE:
            bad.append(f"{col} varies {span:.1%} over N={v.index.min()}..{v.index.max()}")
    if not spans:
        return Check("energy-flat", claim, "n/a", "needs one column at two or more node counts")
    if bad:
        return Check("energy-flat", claim, "fail", "; ".join(bad))
    return Check("energy-flat", claim, "pass", "spans: " + ", ".join(spans))


def check_throughput_decreasing(thr: pd.DataFrame, lo: pd.DataFrame | None = None,
                                hi: pd.DataFrame | None = None) -> Check:
    """Per column: last < first, and no step up whose 95% intervals do not overlap (means alone without CIs)."""
    claim = "throughput decreasing in the node count"
    seen, bad = 0, []
    for col in thr.columns:
        v = thr[col].dropna()
        if len(v) < 2:
            continue
        seen += 1
        if not v.iloc[-1] < v.iloc[0]:
            bad.append(f"{col}: N={v.index[-1]} {v.iloc[-1]:.3g} >= N={v.index[0]} {v.iloc[0]:.3g}")
            continue
        for (n0, x0), (n1, x1) in zip(v.items(), list(v.items())[1:]):
            if x1 <= x0:
                continue
            significant = True
            if lo is not None and hi is not None and col in lo and col in hi:
                h0, l1 = hi.at[n0, col], lo.at[n1, col]
                significant = not (pd.isna(h0) or pd.isna(l1)) and l1 > h0
            if significant:
                bad.append(f"{col}: rises from N={n0} ({x0:.3g}) to N={n1} ({x1:.3g})")
    if seen == 0:
        return Check("throughput-decreasing", claim, "n/a", "needs one column at two or more node counts")
    if bad:
        return Check("throughput-decreasing", claim, "fail", "; ".join(bad[:4]))
    return Check("throughput-decreasing", claim, "pass", f"{seen} column(s) decrease")


def check_sdn_ratio(paper: PaperTables, energy: pd.DataFrame) -> Check:
    """Per congestion control and node count: E(SDN) / E(MPTCP) within the tolerance of 0.8."""
    claim = f"SDN / MPTCP energy within {RATIO_TOLERANCE} of {RATIO_TARGET}"
    ratios, bad = [], []
    for sdn, c in paper.columns.items():
        if not c.held_out:
            continue
        mptcp = next((k for k, m in paper.columns.items() if not m.held_out and m.cc == c.cc and m.mode == "both"),
                     None)
        if mptcp is None or sdn not in energy or mptcp not in energy:
            continue
        for n in energy.index:
            a, b = energy.at[n, sdn], energy.at[n, mptcp]
            if pd.isna(a) or pd.isna(b) or b == 0:
                continue
            r = a / b
            ratios.append(r)
            if abs(r - RATIO_TARGET) > RATIO_TOLERANCE:
                bad.append(f"{c.cc} N={n}: {r:.3f}")
    if not ratios:
        return Check("sdn-mptcp-ratio", claim, "n/a", "needs the SDN policy and MPTCP at one node count "
                     "(a Setup II campaign with policies)")
    if bad:
        return Check("sdn-mptcp-ratio", claim, "fail", "out of range: " + ", ".join(bad[:6]))
    return Check("sdn-mptcp-ratio", claim, "pass", f"{len(ratios)} ratio(s) in {min(ratios):.3f}..{max(ratios):.3f}")


def run_checks(paper: PaperTables, energy_table: pd.DataFrame, thr_table: pd.DataFrame,
               value: str = "ours_mean") -> list[Check]:
    """The four checks on one energy label's analog tables (``value`` = ``ours_mean`` or ``paper``)."""
    e = _wide(energy_table, value)
    t = _wide(thr_table, value)
    lo = _wide(thr_table, "ours_ci_low") if value == "ours_mean" else None
    hi = _wide(thr_table, "ours_ci_high") if value == "ours_mean" else None
    return [check_energy_ordering(paper, e), check_energy_flat(e), check_throughput_decreasing(t, lo, hi),
            check_sdn_ratio(paper, e)]


def checks_table(paper: PaperTables, energy: pd.DataFrame, thr: pd.DataFrame) -> pd.DataFrame:
    """Every check per energy label, ours beside the paper's own result."""
    paper_checks = {c.name: c for c in run_checks(paper, energy.drop_duplicates(["column", "n_receivers"]),
                                                  thr.drop_duplicates(["column", "n_receivers"]), "paper")}
    rows = []
    for label in sorted(set(energy["energy_label"].dropna())):
        ours = run_checks(paper, energy[energy["energy_label"] == label], thr[thr["energy_label"] == label])
        for c in ours:
            rows.append({"energy_label": label, "check": c.name, "claim": c.claim, "status": c.status,
                         "detail": c.detail, "paper_status": paper_checks[c.name].status})
    return pd.DataFrame(rows, columns=["energy_label", "check", "claim", "status", "detail", "paper_status"])
