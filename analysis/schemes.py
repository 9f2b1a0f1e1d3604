"""Every policy side by side, per receiver count, with each related paper's headline beside mplab's number.

For every Setup II case (energy label, congestion control, receiver count, policy): throughput,
energy and energy per bit (J/Mbit: a receiver's energy over the bits it received), each as mean and
95% interval over per-sample means (``analysis.stats``, the sample is the unit), and the change of
each mean against two stated baselines of the same energy label, congestion control and receiver count:

- ``all-both``: MPTCP on both paths, no controller (what the papers call "MPTCP");
- the best single path: whichever of ``all-wifi`` and ``all-lte`` has the lower J/Mbit there.

Beside each policy that stands for a published scheme: the paper's headline (``analysis.headlines``)
and the same kind of change computed from mplab's records against the mplab policy of the same kind
as the paper's baseline (e.g. paper: "-16.2 % energy vs lowRTT" | mplab: "+2.1 % energy vs all-both").

A policy *loses* to a baseline when its mean is worse on the policy's deciding metric: the metric of
its paper's first headline that has an mplab baseline (energy for ES-MPTCP, throughput for MP-SDN...),
else J/Mbit. Worse is higher for energy, J/Mbit, completion time and power, lower for throughput and
efficiency. Whether the difference is resolved is said beside it: a Welch 95% interval of the
difference of per-sample means that excludes zero ("beyond noise"), includes it ("within noise"), or
cannot be computed with one sample on either side.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.headlines import METRIC_WORDS, Headline, Headlines
from analysis.stats import CI_LEVEL, case_stats, per_sample

BASELINE = "all-both"
SINGLE_PATH = ("all-wifi", "all-lte")
KEYS = ["energy_label", "cc", "n_receivers"]
#: the three measures of the table: column -> (name in the table, unit, higher is better)
MEASURES: dict[str, tuple[str, str, bool]] = {
    "throughput_mbit": ("throughput", "Mbit/s", True),
    "energy_j": ("energy", "J", False),
    "j_per_mbit": ("energy per bit", "J/Mbit", False),
}
#: a headline metric -> the record column it is computed from (efficiency = 1 / J/Mbit)
HEADLINE_COLUMN = {"energy": "energy_j", "throughput": "throughput_mbit", "efficiency": "j_per_mbit",
                   "completion_time": "duration_s", "power": "mean_power_w"}
NO_POLICIES = "no records carry a policy (a Setup II campaign, e.g. scenarios/schemes.yaml, has them)"


def with_per_bit(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``j_per_mbit``: each record's energy over the megabits it received (``bytes``, else ``file_bytes``)."""
    got = frame["bytes"].where(frame["bytes"].notna() & (frame["bytes"] > 0), frame["file_bytes"])
    return frame.assign(j_per_mbit=frame["energy_j"] / (got * 8 / 1e6))


def change_pct(metric: str, value: float, base: float) -> float:
    """The relative change of ``value`` against ``base`` in %, as the paper states its metric.

    ``efficiency`` is bits per joule, the inverse of the J/Mbit means passed in.
    """
    if pd.isna(value) or pd.isna(base) or base == 0 or value == 0:
        return np.nan
    if metric == "efficiency":
        return (base / value - 1) * 100
    return (value / base - 1) * 100


def diff_interval(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Welch 95% interval of mean(x) - mean(y); NaN with fewer than two values on either side."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return np.nan, np.nan
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    d = x.mean() - y.mean()
    se = np.sqrt(vx + vy)
    if se == 0:
        return d, d
    dof = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    half = float(sps.t.ppf(0.5 + CI_LEVEL / 2, dof)) * se
    return d - half, d + half


def _higher_better(metric: str) -> bool:
    return METRIC_WORDS[metric][1] if metric in METRIC_WORDS else MEASURES[metric][2]


def _metric_word(metric: str) -> str:
    return METRIC_WORDS[metric][0] if metric in METRIC_WORDS else MEASURES[metric][1]


def judge(metric: str, x: np.ndarray, y: np.ndarray, base_name: str) -> tuple[str, str]:
    """(``wins``/``loses``/``ties``, a sentence) for per-sample values ``x`` of a policy against ``y`` of a baseline.

    ``metric`` is a headline metric (``energy``, ``efficiency``...) or a table measure (``j_per_mbit``).
    """
    hb = _higher_better(metric)
    mx, my = float(np.mean(x)), float(np.mean(y))
    ch = change_pct(metric, mx, my)
    if mx == my:
        word = "ties"
    else:
        # efficiency is judged on J/Mbit (lower = more efficient); every other metric on its own direction
        better = (mx < my) if metric == "efficiency" else ((mx > my) if hb else (mx < my))
        word = "wins" if better else "loses"
    lo, hi = diff_interval(x, y)
    if np.isnan(lo):
        qual = "one sample on a side: no interval"
    elif lo <= 0 <= hi:
        qual = "within noise"
    else:
        qual = "beyond noise"
    verb = {"wins": "wins against", "loses": "loses to", "ties": "ties with"}[word]
    return word, f"{verb} {base_name} ({ch:+.1f} % {_metric_word(metric)}, {qual})"


def deciding_metric(headlines: Headlines, policy: str) -> tuple[str, Headline | None]:
    """The metric a policy is judged on, and the headline it comes from (None: J/Mbit, no headline)."""
    s = headlines.of(policy)
    for h in (s.headlines if s else []):
        if h.baseline.mplab is not None:
            return h.metric, h
    return "j_per_mbit", None


def _values(ps: dict[str, pd.DataFrame], column: str, key: tuple, policy: str) -> np.ndarray:
    d = ps[column]
    m = (d["energy_label"] == key[0]) & (d["cc"] == key[1]) & (d["n_receivers"] == key[2]) & (d["scheme"] == policy)
    return d.loc[m, column].to_numpy(dtype=float)


def side_by_side(frame: pd.DataFrame, headlines: Headlines, ci: str = "t") -> pd.DataFrame:
    """One row per policy case: means, intervals, changes against both baselines, headline and verdicts.

    Args:
        frame: the tidy frame of ``analysis.load`` (every record; unusable ones are counted, not used).
        headlines: the papers' headlines.
        ci: ``t`` or ``bootstrap`` for the per-case intervals.
    """
    f = with_per_bit(frame[frame["policy"].notna()])
    if f.empty:
        return pd.DataFrame()
    cols = list(MEASURES) + ["duration_s", "mean_power_w"]
    stats = {c: case_stats(f, c, ci) for c in cols}
    ps = {c: per_sample(f, c) for c in cols}
    base_e = stats["energy_j"][["energy_label", "cc", "n_receivers", "scheme", "samples_failed", "records_flagged"]]
    rows = []
    for key, grp in stats["j_per_mbit"].groupby(KEYS, sort=True):
        means = {c: stats[c][(stats[c][KEYS] == pd.Series(key, index=KEYS)).all(axis=1)].set_index("scheme")
                 for c in cols}
        jpm = means["j_per_mbit"]["mean"]
        singles = [p for p in SINGLE_PATH if p in jpm.index and pd.notna(jpm[p])]
        best_single = min(singles, key=lambda p: jpm[p]) if singles else None
        have_base = BASELINE in jpm.index and pd.notna(jpm[BASELINE])
        for pol in grp["scheme"]:
            row: dict = dict(zip(KEYS, key), policy=pol, n_samples=int(means["j_per_mbit"].at[pol, "n_samples"]))
            for c in MEASURES:
                m = means[c]
                for s in ("mean", "ci_low", "ci_high"):
                    row[f"{c}_{s}"] = m.at[pol, s] if pol in m.index else np.nan
            for tag, base in (("all_both", BASELINE if have_base else None), ("best_single", best_single)):
                for c in MEASURES:
                    row[f"{c}_vs_{tag}_pct"] = (change_pct(c, row[f"{c}_mean"], means[c].at[base, "mean"])
                                                if base is not None else np.nan)
            row["best_single"] = best_single
            metric, h = deciding_metric(headlines, pol)
            col = HEADLINE_COLUMN.get(metric, metric)
            row["deciding_metric"] = metric
            for tag, base in (("all_both", BASELINE if have_base else None), ("best_single", best_single)):
                if base is None:
                    row[f"verdict_{tag}"], row[f"verdict_{tag}_text"] = "n/a", f"no {tag.replace('_', ' ')} baseline ran"
                elif base == pol:
                    row[f"verdict_{tag}"], row[f"verdict_{tag}_text"] = "baseline", "the baseline"
                else:
                    x, y = _values(ps, col, key, pol), _values(ps, col, key, base)
                    if len(x) == 0 or len(y) == 0:
                        row[f"verdict_{tag}"], row[f"verdict_{tag}_text"] = "n/a", f"no usable {base} samples"
                    else:
                        row[f"verdict_{tag}"], row[f"verdict_{tag}_text"] = judge(metric, x, y, base)
            row["paper_headline"] = h.paper_text if h else _no_headline(headlines, pol)
            row["mplab_same_kind"] = (_mplab_text(h, means, pol) if h else "")
            e = base_e[(base_e[KEYS] == pd.Series(key, index=KEYS)).all(axis=1) & (base_e["scheme"] == pol)]
            row["samples_failed"] = int(e["samples_failed"].sum())
            row["records_flagged"] = int(e["records_flagged"].sum())
            rows.append(row)
    out = pd.DataFrame(rows)
    order = {p: i for i, p in enumerate((*SINGLE_PATH, BASELINE, "ref-is", "ref-is-tuned", *headlines.schemes))}
    out["_o"] = out["policy"].map(lambda p: order.get(p, len(order)))
    return out.sort_values([*KEYS, "_o", "policy"], kind="stable").drop(columns="_o").reset_index(drop=True)


def _no_headline(headlines: Headlines, policy: str) -> str:
    if policy in (*SINGLE_PATH, BASELINE):
        return "(a baseline)"
    s = headlines.of(policy)
    if s is None:
        return "(no paper in the headlines file)"
    return f"(none: {s.note})" if s.note else "(no headline with an mplab baseline)"


def _mplab_text(h: Headline, means: dict[str, pd.DataFrame], policy: str) -> str:
    col = HEADLINE_COLUMN[h.metric]
    m = means[col]["mean"]
    base = h.baseline.mplab
    if base not in m.index or pd.isna(m.get(base)):
        return f"{base} not run"
    return f"{change_pct(h.metric, m[policy], m[base]):+.1f} % {METRIC_WORDS[h.metric][0]} vs {base}"


def headline_rows(frame: pd.DataFrame, headlines: Headlines) -> pd.DataFrame:
    """One row per headline and (energy label, congestion control, receiver count): the paper's change and mplab's.

    A scheme whose policy did not run gets one row per headline with no mplab number, so every headline
    of the file is listed.
    """
    f = with_per_bit(frame[frame["policy"].notna()])
    cols = ["energy_label", "cc", "n_receivers", "policy", "claim", "metric", "paper_change_pct", "paper_baseline",
            "mplab_baseline", "baseline_match", "setting", "source", "verified", "caveat", "mplab_change_pct",
            "mplab_n_samples", "direction", "mplab_vs_best_single_pct", "best_single"]
    ps_cols = sorted(set(HEADLINE_COLUMN.values()))
    means = {c: case_stats(f, c) for c in ps_cols} if not f.empty else {}
    jpm = means.get("j_per_mbit", pd.DataFrame(columns=[*KEYS, "scheme", "mean"]))
    rows = []
    for pol, scheme in headlines.schemes.items():
        for h in scheme.headlines:
            col = HEADLINE_COLUMN[h.metric]
            base_row = {"policy": pol, "claim": h.claim, "metric": h.metric, "paper_change_pct": h.change_pct,
                        "paper_baseline": h.baseline.paper, "mplab_baseline": h.baseline.mplab,
                        "baseline_match": h.baseline.match, "setting": scheme.setting, "source": h.source,
                        "verified": h.verified, "caveat": h.caveat or ""}
            ran = jpm[jpm["scheme"] == pol] if len(jpm) else jpm
            if ran.empty:
                rows.append({**base_row, "energy_label": None, "cc": None, "n_receivers": np.nan,
                             "mplab_change_pct": np.nan, "mplab_n_samples": 0, "direction": "not run",
                             "mplab_vs_best_single_pct": np.nan, "best_single": None})
                continue
            for _, r in ran.iterrows():
                key = tuple(r[k] for k in KEYS)
                sel = (means[col][KEYS] == pd.Series(key, index=KEYS)).all(axis=1)
                m = means[col][sel].set_index("scheme")["mean"]
                jm = jpm[(jpm[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)].set_index("scheme")["mean"]
                singles = [p for p in SINGLE_PATH if p in jm.index and pd.notna(jm[p])]
                best = min(singles, key=lambda p: jm[p]) if singles else None
                base = h.baseline.mplab
                ch = change_pct(h.metric, m.get(pol, np.nan), m.get(base, np.nan)) if base else np.nan
                if base is None:
                    direction = "no mplab counterpart"
                elif pd.isna(ch):
                    direction = f"{base} not run"
                elif ch == 0 or np.sign(ch) == np.sign(h.change_pct):
                    direction = "same"
                else:
                    direction = "opposite"
                rows.append({**base_row, **dict(zip(KEYS, key)), "mplab_change_pct": ch,
                             "mplab_n_samples": int(r["n_samples"]), "direction": direction,
                             "mplab_vs_best_single_pct": (change_pct(h.metric, m.get(pol, np.nan), m.get(best, np.nan))
                                                          if best else np.nan), "best_single": best})
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------ display (HTML and markdown)

def _num(x: float) -> str:
    """Three or four significant figures in fixed notation: 45.4, 8.37, 0.119."""
    if pd.isna(x):
        return "–"
    a = abs(x)
    return f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 1 else f"{x:.3f}" if a >= 0.01 else f"{x:.2g}"


def _with_ci(mean: float, lo: float, hi: float) -> str:
    if pd.isna(mean):
        return "–"
    if pd.isna(lo) or pd.isna(hi):
        return _num(mean)
    return f"{_num(mean)}\u00a0[{_num(lo)},\u00a0{_num(hi)}]"   # no-break spaces: one value, one line


def _pct(x: float) -> str:
    return "–" if pd.isna(x) else f"{x:+.1f}"


def display_tables(t: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """The side-by-side frame as shown: one table per (energy label, congestion control, receiver count)."""
    out = []
    if t.empty:
        return out
    for key, d in t.groupby(KEYS, sort=True):
        best = next((b for b in d["best_single"] if isinstance(b, str)), None)
        shown = pd.DataFrame({
            "policy": d["policy"], "samples": d["n_samples"],
            "throughput (Mbit/s)": [_with_ci(*v) for v in d[[f"throughput_mbit_{s}" for s in ("mean", "ci_low",
                                                                                                   "ci_high")]].values],
            "energy (J)": [_with_ci(*v) for v in d[[f"energy_j_{s}" for s in ("mean", "ci_low", "ci_high")]].values],
            "J/Mbit": [_with_ci(*v) for v in d[[f"j_per_mbit_{s}" for s in ("mean", "ci_low", "ci_high")]].values],
            f"vs {BASELINE}: Mbit/s / J / J/Mbit (%)": [
                _changes(r, "all_both") for r in d.to_dict("records")],
            f"vs best single path ({best or 'none ran'}): Mbit/s / J / J/Mbit (%)": [
                _changes(r, "best_single") for r in d.to_dict("records")],
            "paper's headline": d["paper_headline"],
            "mplab, same kind": d["mplab_same_kind"],
            "verdict": [_verdict_cell(r) for r in d.to_dict("records")],
        })
        out.append((key, shown.reset_index(drop=True)))
    return out


def summary_tables(t: pd.DataFrame, headlines: Headlines) -> list[tuple[tuple, pd.DataFrame]]:
    """One compact table per (energy label, congestion control): a row per policy, columns per receiver count.

    Per receiver count: throughput and J/Mbit means, the same kind of change as the paper's first headline
    (against ``all-both``), and the verdicts against ``all-both`` / the best single path (``(noise)`` when the
    difference is within noise). What README and docs quote.
    """
    out = []
    if t.empty:
        return out
    for key, d in t.groupby(["energy_label", "cc"], sort=True):
        ns = sorted({int(n) for n in d["n_receivers"]})
        rows = []
        for pol in dict.fromkeys(d["policy"]):
            _, h = deciding_metric(headlines, pol)
            row = {"policy": pol,
                   "paper (vs its MPTCP)": f"{h.change_pct:+.4g} % {METRIC_WORDS[h.metric][0]}" if h else "–"}
            for n in ns:
                r = d[(d["policy"] == pol) & (d["n_receivers"] == n)]
                if r.empty:
                    row.update({f"{n} rx: Mbit/s": "–", f"{n} rx: J/Mbit": "–", f"{n} rx: mplab vs all-both": "–",
                                f"{n} rx: vs all-both / best single": "–"})
                    continue
                r = r.iloc[0].to_dict()
                same = r["mplab_same_kind"].replace(" vs all-both", "") if r["mplab_same_kind"] else \
                    (f"{_pct(r['j_per_mbit_vs_all_both_pct'])} % J/Mbit" if r["verdict_all_both"] != "baseline"
                     else "–")
                row.update({f"{n} rx: Mbit/s": _num(r["throughput_mbit_mean"]),
                            f"{n} rx: J/Mbit": _num(r["j_per_mbit_mean"]),
                            f"{n} rx: mplab vs all-both": same,
                            f"{n} rx: vs all-both / best single": " / ".join(
                                _short_verdict(r, tag) for tag in ("all_both", "best_single"))})
            rows.append(row)
        out.append((key, pd.DataFrame(rows)))
    return out


def _short_verdict(r: dict, tag: str) -> str:
    v = r[f"verdict_{tag}"]
    if v in ("wins", "loses", "ties") and "within noise" in r[f"verdict_{tag}_text"]:
        return f"{v} (noise)"
    return v


def _changes(r: dict, tag: str) -> str:
    if r[f"verdict_{tag}"] == "baseline":
        return "(the baseline)"
    return " / ".join(_pct(r[f"{c}_vs_{tag}_pct"]) for c in MEASURES)


def _verdict_cell(r: dict) -> str:
    parts = []
    for tag in ("all_both", "best_single"):
        if r[f"verdict_{tag}"] in ("wins", "loses", "ties"):
            parts.append(r[f"verdict_{tag}_text"])
    if not parts:
        return "baseline"
    return "; ".join(parts)


def display_headlines(h: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """The headline rows as shown: per (energy label, congestion control), one row per headline, one column per N."""
    if h.empty:
        return []
    ran = h[h["energy_label"].notna()]
    groups = [(k, d) for k, d in ran.groupby(["energy_label", "cc"], sort=True)] or [((None, None), ran)]
    out = []
    not_run = h[h["energy_label"].isna()]
    for key, d in groups:
        ns = sorted({int(n) for n in d["n_receivers"].dropna()})
        rows = []
        for (pol, claim), g in pd.concat([d, not_run]).groupby(["policy", "claim"], sort=False):
            r0 = g.iloc[0]
            row = {"scheme": pol, "paper's claim": claim,
                   "paper: change vs its baseline": f"{r0['paper_change_pct']:+.4g} % vs {r0['paper_baseline']}",
                   "setting": r0["setting"], "source": r0["source"],
                   "verified against the paper": "yes" if r0["verified"] else "no (ambiguous: see the caveat)",
                   "mplab baseline": r0["mplab_baseline"] if isinstance(r0["mplab_baseline"], str) else "none"}
            for n in ns:
                gn = g[g["n_receivers"] == n]
                if gn.empty:
                    row[f"mplab, {n} receivers"] = "not run" if r0["direction"] == "not run" else "–"
                    continue
                x = gn.iloc[0]
                if pd.isna(x["mplab_change_pct"]):
                    row[f"mplab, {n} receivers"] = x["direction"]
                else:
                    row[f"mplab, {n} receivers"] = (f"{x['mplab_change_pct']:+.1f} % vs {x['mplab_baseline']} "
                                                    f"({x['direction']} direction)")
            rows.append(row)
        order = list(dict.fromkeys(h["policy"]))
        df = pd.DataFrame(rows)
        df["_o"] = df["scheme"].map(order.index)
        df = df.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)
        df.loc[df["scheme"].eq(df["scheme"].shift()), "setting"] = "(as above)"
        out.append((key, df))
    return out


def markdown_table(df: pd.DataFrame) -> str:
    """A frame as a GitHub markdown table (pipes in cells escaped)."""
    def cell(x) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines)
