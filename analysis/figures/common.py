"""Small drawing helpers shared by the figure modules."""
from __future__ import annotations

import numpy as np
import pandas as pd


def yerr(d: pd.DataFrame) -> np.ndarray | None:
    """Asymmetric error bars from ``ci_low``/``ci_high`` (zero where a case has one sample)."""
    lo = (d["mean"] - d["ci_low"]).fillna(0).clip(lower=0).to_numpy()
    hi = (d["ci_high"] - d["mean"]).fillna(0).clip(lower=0).to_numpy()
    return np.vstack([lo, hi])


def ci_note(method_text: str) -> str:
    return f"Error bars: {method_text}."


def left_out_note(*stats: pd.DataFrame) -> str:
    """What the drawn cases left out (from ``case_stats`` rows), for a caption; empty when nothing was."""
    failed = max((int(s["samples_failed"].sum()) for s in stats if len(s)), default=0)
    flagged = max((int(s["records_flagged"].sum()) for s in stats if len(s)), default=0)
    if not failed and not flagged:
        return ""
    return (f" Left out of these means: {failed} failed sample(s), {flagged} flagged record(s) "
            "(see \"Left out\").")


def integer_x(ax) -> None:
    """Receiver counts are whole numbers: no 4.5-receiver ticks."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def legend_outside(fig, ax, **kw) -> None:
    """The legend of ``ax`` to the right of the whole figure, clear of every panel (never over data).

    ``bbox_inches="tight"`` (``analysis.style.save``) grows the canvas to hold it.
    """
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), **kw)
