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
