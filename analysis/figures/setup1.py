"""Setup I (plain MPTCP, no controller): the paper's Figs. 3-5 analogs.

- ``setup1-one-receiver``: throughput and energy with one receiver, per congestion control and
  interface mode (Figs. 3-4). Without one-receiver cases the smallest receiver count stands in,
  and the caption says so.
- ``setup1-receivers``: throughput and energy against the number of receivers, one panel per
  congestion control, one line per mode (Fig. 5 and the shape of Tables 2-3).

Only records without a policy are Setup I.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figures.common import ci_note, left_out_note, legend_outside, yerr
from analysis.style import Palette, Saved, Skipped, label_energy, order_ccs, order_schemes, save

MODES = ("wifi", "lte", "both")


def _setup1(stats: pd.DataFrame) -> pd.DataFrame:
    return stats[stats["scheme"].isin(MODES) & stats["n_samples"].gt(0)]


def one_receiver(energy: pd.DataFrame, thr: pd.DataFrame, palette: Palette, out: Path,
                 ci_text: str) -> Saved | Skipped:
    """Grouped bars: x = congestion control, one bar per mode; throughput (top) and energy (bottom)."""
    name, title = "setup1-one-receiver", "Setup I: per congestion control and mode (Figs. 3-4 analog)"
    e, t = _setup1(energy), _setup1(thr)
    if e.empty and t.empty:
        return Skipped(name, title, "no Setup I cases (records with a mode and no policy)")
    n = int(min(set(e["n_receivers"]) | set(t["n_receivers"])))
    # The heading says what is drawn: the paper's Figs. 3-4 have one receiver; a campaign without
    # one-receiver cases is drawn at its smallest N, and the heading says that N.
    title = ("Setup I: one receiver, per congestion control and mode (Figs. 3-4)" if n == 1 else
             f"Setup I: N = {n} receivers, per congestion control and mode (the paper's Figs. 3-4 have one)")
    e, t = e[e["n_receivers"] == n], t[t["n_receivers"] == n]
    ccs = order_ccs(set(e["cc"]) | set(t["cc"]))
    modes = order_schemes(set(e["scheme"]) | set(t["scheme"]))
    fig, axes = plt.subplots(2, 1, figsize=(max(5.5, 1.3 * len(ccs) + 2), 6), sharex=True)
    width = 0.8 / max(1, len(modes))
    x = np.arange(len(ccs))
    for ax, d, ylabel in ((axes[0], t, "throughput per receiver (Mbit/s)"), (axes[1], e, "energy per receiver (J)")):
        for i, mode in enumerate(modes):
            dm = d[d["scheme"] == mode].set_index("cc").reindex(ccs)
            ok = dm["mean"].notna().to_numpy()
            if not ok.any():
                continue
            dm = dm[ok]
            ax.bar(x[ok] + (i - (len(modes) - 1) / 2) * width, dm["mean"], width, yerr=yerr(dm), capsize=2,
                   color=palette.colour(mode), label=mode, edgecolor="white", linewidth=0.5)
        ax.set_ylabel(ylabel)
    axes[1].set_xticks(x, ccs)
    axes[1].set_xlabel("congestion control")
    axes[0].legend(title="interfaces", ncols=len(modes), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    stand_in = "" if n == 1 else f" These campaigns have no one-receiver case: N = {n} stands in."
    fig.suptitle(f"Setup I, N = {n} receiver{'s' if n > 1 else ''}", y=1.04)
    label_energy(fig, e["energy_label"])
    caption = (f"Mean per-receiver throughput and energy with {n} receiver(s), per congestion control (x) and "
               f"interface mode (colour).{stand_in} {ci_note(ci_text)}"
               + left_out_note(energy[energy["scheme"].isin(MODES) & (energy["n_receivers"] == n)]))
    return save(fig, out, name, title, caption, shows_energy=True)


def receivers(energy: pd.DataFrame, thr: pd.DataFrame, palette: Palette, out: Path, ci_text: str) -> Saved | Skipped:
    """Small multiples: one column per congestion control; throughput (top) and energy (bottom) against N."""
    name, title = "setup1-receivers", "Setup I: throughput and energy against the number of receivers (Fig. 5)"
    e, t = _setup1(energy), _setup1(thr)
    counts = sorted(set(e["n_receivers"]) | set(t["n_receivers"]))
    if len(counts) < 2:
        return Skipped(name, title, f"needs at least two receiver counts; these campaigns have "
                                    f"{', '.join(map(str, counts)) or 'none'}")
    ccs = order_ccs(set(e["cc"]) | set(t["cc"]))
    fig, axes = plt.subplots(2, len(ccs), figsize=(2.6 * len(ccs) + 1, 5.2), sharex=True, sharey="row",
                             squeeze=False)
    for j, cc in enumerate(ccs):
        for i, (d, ylabel) in enumerate(((t, "throughput per receiver (Mbit/s)"), (e, "energy per receiver (J)"))):
            ax = axes[i][j]
            for mode in order_schemes(set(d["scheme"])):
                dm = d[(d["cc"] == cc) & (d["scheme"] == mode)].sort_values("n_receivers")
                if dm.empty:
                    continue
                ax.errorbar(dm["n_receivers"], dm["mean"], yerr=yerr(dm), marker="o", ms=4, capsize=2,
                            color=palette.colour(mode), label=mode)
            if i == 0:
                ax.set_title(cc)
            if j == 0:
                ax.set_ylabel(ylabel)
            if i == 1:
                ax.set_xlabel("receivers")
                ax.set_xticks(counts)
    legend_outside(fig, axes[0][0], title="interfaces")
    label_energy(fig, e["energy_label"])
    caption = ("Mean per-receiver throughput (top) and energy (bottom) against the number of concurrent "
               f"receivers, one panel per congestion control, one colour per interface mode. {ci_note(ci_text)}"
               + left_out_note(energy[energy["scheme"].isin(MODES)]))
    return save(fig, out, name, title, caption, shows_energy=True)
