"""Setup II (a controller chooses each receiver's interfaces): Figs. 10-15 analogs and a scatter.

Drawn only from records that carry a ``policy`` (a Setup II campaign, whose controller chose the interfaces):

- ``setup2-is-vs-tuned``: energy against receivers, IS vs IS + Tuning, one panel per
  congestion control (Figs. 10-11);
- ``setup2-policies-<cc>``: throughput and energy per policy against receivers (Figs. 12-15,
  one figure per congestion control: balia and cubic in the paper, any other that ran too);
- ``setup2-scatter``: throughput against energy, one colour per policy (as Pantheon plots
  throughput against delay): every sample faint, case means with 95% intervals on both axes.
- ``setup2-schemes``: the same, one panel per receiver count (and a row per congestion control),
  every policy its own colour *and* marker, a dotted cross at ``all-both`` (better is right and
  down of it): the figure of the schemes side by side (``analysis.schemes``).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.figures.common import ci_note, integer_x, left_out_note, legend_outside, yerr
from analysis.style import Palette, Saved, Skipped, label_energy, marker, order_ccs, order_schemes, save

IS, TUNED = "ref-is", "ref-is-tuned"
NO_POLICIES = ("no records carry a policy (a Setup II campaign has them: a scenario with `policies`, e.g. "
               "scenarios/quick-setup2.yaml)")


def _policies(stats: pd.DataFrame, policies: set[str]) -> pd.DataFrame:
    return stats[stats["scheme"].isin(policies) & stats["n_samples"].gt(0)]


def is_vs_tuned(energy: pd.DataFrame, policies: set[str], palette: Palette, out: Path,
                ci_text: str) -> Saved | Skipped:
    name, title = "setup2-is-vs-tuned", "Setup II: energy against receivers, IS vs IS + Tuning (Figs. 10-11)"
    if not policies:
        return Skipped(name, title, NO_POLICIES)
    e = _policies(energy, {IS, TUNED} & policies)
    if e.empty:
        return Skipped(name, title, f"neither {IS} nor {TUNED} ran (policies: {', '.join(sorted(policies))})")
    ccs = order_ccs(set(e["cc"]))
    fig, axes = plt.subplots(1, len(ccs), figsize=(3.4 * len(ccs) + 0.8, 3.4), sharey=True, squeeze=False)
    for ax, cc in zip(axes[0], ccs):
        for pol in (IS, TUNED):
            d = e[(e["cc"] == cc) & (e["scheme"] == pol)].sort_values("n_receivers")
            if not d.empty:
                ax.errorbar(d["n_receivers"], d["mean"], yerr=yerr(d), marker="o", ms=4, capsize=2,
                            color=palette.colour(pol), label=pol)
        ax.set_title(cc)
        ax.set_xlabel("receivers")
        integer_x(ax)
    axes[0][0].set_ylabel("energy per receiver (J)")
    legend_outside(fig, axes[0][0], title="policy")
    label_energy(fig, e["energy_label"])
    caption = ("Mean per-receiver energy under Interface Selection (ref-is) and IS + DNN Tuning (ref-is-tuned) "
               f"against the number of receivers, one panel per congestion control. {ci_note(ci_text)}"
               + left_out_note(energy[energy["scheme"].isin({IS, TUNED})]))
    return save(fig, out, name, title, caption, shows_energy=True)


def policies_vs_receivers(energy: pd.DataFrame, thr: pd.DataFrame, policies: set[str], palette: Palette, out: Path,
                          ci_text: str) -> list[Saved | Skipped]:
    title0 = "Setup II: throughput and energy per policy against receivers (Figs. 12-15)"
    if not policies:
        return [Skipped("setup2-policies", title0, NO_POLICIES)]
    e, t = _policies(energy, policies), _policies(thr, policies)
    res: list[Saved | Skipped] = []
    for cc in order_ccs(set(e["cc"]) | set(t["cc"])):
        fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.5))
        for ax, d, ylabel in ((axes[0], t, "throughput per receiver (Mbit/s)"),
                              (axes[1], e, "energy per receiver (J)")):
            dc = d[d["cc"] == cc]
            for pol in order_schemes(set(dc["scheme"])):
                dp = dc[dc["scheme"] == pol].sort_values("n_receivers")
                ax.errorbar(dp["n_receivers"], dp["mean"], yerr=yerr(dp), marker="o", ms=4, capsize=2,
                            color=palette.colour(pol), label=pol)
            ax.set_xlabel("receivers")
            ax.set_ylabel(ylabel)
            integer_x(ax)
        legend_outside(fig, axes[0], title="policy")
        fig.suptitle(f"Setup II, {cc}")
        label_energy(fig, e[e["cc"] == cc]["energy_label"])
        caption = (f"Mean per-receiver throughput (left) and energy (right) per policy against the number of "
                   f"receivers, congestion control {cc}. {ci_note(ci_text)}"
                   + left_out_note(energy[energy["scheme"].isin(policies) & (energy["cc"] == cc)]))
        res.append(save(fig, out, f"setup2-policies-{cc}", f"Setup II, {cc}: throughput and energy per policy "
                        "(Figs. 12-15)", caption, shows_energy=True))
    return res


def _samples_and_means(samples_e: pd.DataFrame, samples_t: pd.DataFrame, energy: pd.DataFrame, thr: pd.DataFrame,
                       policies: set[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-sample (energy, throughput) of the policies, and their case means side by side (``_e``, ``_t``)."""
    keys = ["energy_label", "cc", "n_receivers", "scheme", "campaign", "sample_id"]
    s = samples_e.merge(samples_t, on=keys)
    case = ["energy_label", "cc", "n_receivers", "scheme"]
    m = _policies(energy, policies).merge(_policies(thr, policies), on=case, suffixes=("_e", "_t"))
    return s[s["scheme"].isin(policies)], m


def _xy_err(m: pd.DataFrame):
    """Error bars of throughput (x, ``_t`` columns) and energy (y, ``_e``) case means side by side."""
    return tuple(yerr(m.rename(columns={f"mean_{k}": "mean", f"ci_low_{k}": "ci_low", f"ci_high_{k}": "ci_high"}))
                 for k in ("t", "e"))


def scatter(samples_e: pd.DataFrame, samples_t: pd.DataFrame, energy: pd.DataFrame, thr: pd.DataFrame,
            policies: set[str], palette: Palette, out: Path, ci_text: str) -> Saved | Skipped:
    """Per-sample points (faint) and per-case means with intervals, throughput (x) against energy (y)."""
    name, title = "setup2-scatter", "Setup II: throughput against energy per policy"
    if not policies:
        return Skipped(name, title, NO_POLICIES)
    s, m = _samples_and_means(samples_e, samples_t, energy, thr, policies)
    if m.empty:
        return Skipped(name, title, "no policy case has both throughput and energy")
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for pol in order_schemes(set(m["scheme"])):
        sp = s[s["scheme"] == pol]
        ax.scatter(sp["throughput_mbit"], sp["energy_j"], s=8, alpha=0.25, color=palette.colour(pol), linewidths=0)
        for cc in order_ccs(set(m["cc"])):
            d = m[(m["scheme"] == pol) & (m["cc"] == cc)]
            if d.empty:
                continue
            xe, ye = _xy_err(d)
            ax.errorbar(d["mean_t"], d["mean_e"], xerr=xe, yerr=ye, fmt=marker(cc), ms=5, capsize=2,
                        color=palette.colour(pol), label=f"{pol}, {cc}")
    ax.set_xlabel("throughput per receiver (Mbit/s)")
    ax.set_ylabel("energy per receiver (J)")
    legend_outside(fig, ax)
    label_energy(fig, m["energy_label"])
    caption = ("Throughput against energy: each faint dot is one sample (mean over its receivers); markers are "
               "case means (one per policy, congestion control and receiver count; marker = congestion control). "
               f"Better is right and down. {ci_note(ci_text)}" + left_out_note(energy[energy["scheme"].isin(policies)]))
    return save(fig, out, name, title, caption, shows_energy=True)


BASELINE_POLICIES = ("all-wifi", "all-lte", "all-both")
POLICY_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p", "8", "d")


def schemes_by_receivers(samples_e: pd.DataFrame, samples_t: pd.DataFrame, energy: pd.DataFrame,
                         thr: pd.DataFrame, policies: set[str], palette: Palette, out: Path,
                         ci_text: str) -> Saved | Skipped:
    """Throughput (x) against energy (y) of every policy, one panel per receiver count (rows: congestion controls)."""
    name, title = "setup2-schemes", "Setup II: every policy, throughput against energy, per receiver count"
    if not policies:
        return Skipped(name, title, NO_POLICIES)
    s, m = _samples_and_means(samples_e, samples_t, energy, thr, policies)
    if m.empty:
        return Skipped(name, title, "no policy case has both throughput and energy")
    ccs, ns = order_ccs(set(m["cc"])), sorted({int(n) for n in m["n_receivers"]})
    pols = order_schemes(set(m["scheme"]))
    mk = {p: POLICY_MARKERS[i % len(POLICY_MARKERS)] for i, p in enumerate(pols)}
    fig, axes = plt.subplots(len(ccs), len(ns), figsize=(3.6 * len(ns) + 0.6, 3.4 * len(ccs) + 0.9),
                             squeeze=False)
    handles = {}
    for row, cc in zip(axes, ccs):
        for ax, n in zip(row, ns):
            d = m[(m["cc"] == cc) & (m["n_receivers"] == n)]
            for pol in pols:
                dp = d[d["scheme"] == pol]
                if dp.empty:
                    continue
                sp = s[(s["scheme"] == pol) & (s["cc"] == cc) & (s["n_receivers"] == n)]
                ax.scatter(sp["throughput_mbit"], sp["energy_j"], s=10, alpha=0.3, marker=mk[pol],
                           color=palette.colour(pol), linewidths=0)
                xe, ye = _xy_err(dp)
                # The fixed assignments are drawn larger and underneath, so a policy that chose the same
                # paths (ref-is on all-lte, say) sits visibly on top of its baseline instead of hiding it.
                big = pol in BASELINE_POLICIES
                h = ax.errorbar(dp["mean_t"], dp["mean_e"], xerr=xe, yerr=ye, fmt=mk[pol], ms=10 if big else 6,
                                capsize=2, color=palette.colour(pol), mec="black", mew=0.4, label=pol,
                                zorder=2 if big else 3)
                handles.setdefault(pol, h)
                if pol == "all-both":
                    ax.axvline(float(dp["mean_t"].iloc[0]), color="#7a3fa0", lw=0.7, ls=":", zorder=0)
                    ax.axhline(float(dp["mean_e"].iloc[0]), color="#7a3fa0", lw=0.7, ls=":", zorder=0)
            ax.set_title(f"{n} receivers, {cc}")
            ax.set_xlabel("throughput per receiver (Mbit/s)")
            ax.set_ylabel("energy per receiver (J)")
    fig.tight_layout()
    fig.legend([handles[p] for p in pols if p in handles], [p for p in pols if p in handles], title="policy",
               loc="center left", bbox_to_anchor=(1.0, 0.5))
    label_energy(fig, m["energy_label"])
    caption = ("Throughput against energy of every policy, one panel per receiver count (a row per congestion "
               "control). Faint points: samples (mean over their receivers); large markers: case means; every "
               "policy has its own colour and marker; the fixed assignments (all-wifi, all-lte, all-both) are drawn "
               "larger, underneath the others. The dotted cross marks all-both (MPTCP on both paths): a "
               f"policy right of and below it is faster and cheaper. {ci_note(ci_text)}"
               + left_out_note(energy[energy["scheme"].isin(policies)]))
    return save(fig, out, name, title, caption, shows_energy=True)
