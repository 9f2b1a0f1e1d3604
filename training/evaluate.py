"""Evaluation on the test split: MAE, MAPE and R2, overall and per case, beside baselines.

Baselines, fitted on the same training rows and features: the mean predictor (what any model
must beat), linear regression (on standardised features) and gradient-boosted trees
(scikit-learn's HistGradientBoostingRegressor). They show what the MLP adds.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

Predictor = Callable[[np.ndarray], np.ndarray]
# R2 compares errors with the spread of the target; over a handful of rows of one case that
# spread is noise (three rows gave R2 = -661 with a 2 % MAPE), so per-case R2 needs this many rows.
MIN_ROWS_FOR_R2 = 10


@dataclass(frozen=True)
class Scores:
    n: int
    mae_j: float
    mape_pct: float
    r2: float | None  # None: too few rows for R2 to mean anything (``MIN_ROWS_FOR_R2``)


def scores(y_true: np.ndarray, y_pred: np.ndarray, min_rows_r2: int = 2) -> Scores:
    """MAE (J), MAPE (%) and R2 (None under ``min_rows_r2`` rows).

    R2 of a constant target is reported as 0 when predictions are exact, else -inf.
    """
    y = np.asarray(y_true, dtype=np.float64).reshape(-1)
    p = np.asarray(y_pred, dtype=np.float64).reshape(-1)
    err = p - y
    ss_res = float((err ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (0.0 if ss_res == 0 else float("-inf"))
    # Energies are strictly positive for a real transfer; guard the division anyway.
    mape = float(np.mean(np.abs(err) / np.maximum(np.abs(y), 1e-9)) * 100)
    return Scores(len(y), float(np.abs(err).mean()), mape, r2 if len(y) >= min_rows_r2 else None)


def fit_baselines(x: np.ndarray, y: np.ndarray, seed: int) -> dict[str, Predictor]:
    """Mean predictor, linear regression and gradient-boosted trees on the training rows."""
    mean = float(np.mean(y))
    lin = make_pipeline(StandardScaler(), LinearRegression()).fit(x, y)
    # Small campaigns have few rows: let leaves be small rather than refuse to split.
    gbt = HistGradientBoostingRegressor(random_state=seed, min_samples_leaf=max(1, min(20, len(y) // 10)))
    gbt.fit(x, y)
    return {"mean": lambda a: np.full(len(a), mean), "linear": lin.predict, "gbt": gbt.predict}


def evaluate(test: pd.DataFrame, x_test: np.ndarray, y_test: np.ndarray, predictors: dict[str, Predictor]) -> dict:
    """Scores of every predictor on the test rows: ``{"overall": {name: Scores}, "per_case": [...]}``."""
    preds = {name: np.asarray(f(x_test)).reshape(-1) for name, f in predictors.items()}
    overall = {name: asdict(scores(y_test, p)) for name, p in preds.items()}
    per_case = []
    case_ids = test["case_id"].to_numpy()
    for cid in sorted(set(case_ids)):
        m = case_ids == cid
        row = test[m].iloc[0]
        per_case.append({"case_id": cid, "cc": row["cc"], "n_receivers": int(row["n_receivers"]),
                         "mode": row["mode"],
                         **{name: asdict(scores(y_test[m], p[m], MIN_ROWS_FOR_R2)) for name, p in preds.items()}})
    return {"overall": overall, "per_case": per_case}
