"""Features and target: dataset rows -> a float matrix in a fixed, recorded order.

The reference paper relates "the throughput of the interfaces in use" to a receiver's energy
and does not list its inputs (ambiguity `ref-dnn-inputs` in docs/reference/ambiguities.md). We use:

- ``n_receivers`` (numeric): how many receivers share the cell and the AP in the case;
- ``cc`` one-hot over the congestion controls seen in training (an unknown one is an error);
- ``mode`` one-hot over wifi / lte / both (the interfaces in use);
- ``wifi_throughput_mbit``, ``lte_throughput_mbit``: per-interface throughput (from byte counters).

The target is ``energy_j`` for the whole transfer of that receiver. Everything a controller
needs to build the same vector (order, categories) goes to model.json via ``FeatureSpec``.
Total throughput is left out on purpose: it is the sum of the two interface rates (collinear),
and the transfer duration is left out because a controller predicting energy *before* moving
the file does not know it (it follows from file size / throughput, which the model learns
for the dataset's file size; a model is valid for that file size only, recorded in model.json).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from harness.config.scenario import MODES
from harness.errors import ConfigError

NUMERIC = ("n_receivers", "wifi_throughput_mbit", "lte_throughput_mbit")
TARGET = "energy_j"


@dataclass(frozen=True)
class FeatureSpec:
    """How rows become feature vectors: the categories and the resulting column order."""

    ccs: tuple[str, ...]
    modes: tuple[str, ...] = MODES

    @classmethod
    def fit(cls, frame: pd.DataFrame) -> FeatureSpec:
        """Categories from the training rows (sorted, so the order is stable)."""
        return cls(ccs=tuple(sorted(set(frame["cc"]))))

    @property
    def names(self) -> list[str]:
        """Feature names in matrix order."""
        return (["n_receivers"] + [f"cc={c}" for c in self.ccs] + [f"mode={m}" for m in self.modes]
                + ["wifi_throughput_mbit", "lte_throughput_mbit"])

    def to_dict(self) -> dict:
        return {"order": self.names, "encodings": {"cc": {"one_hot": list(self.ccs)},
                                                    "mode": {"one_hot": list(self.modes)}},
                **{"spec": asdict(self)}}

    @classmethod
    def from_dict(cls, d: Mapping) -> FeatureSpec:
        s = d["spec"]
        return cls(ccs=tuple(s["ccs"]), modes=tuple(s["modes"]))

    def matrix(self, rows: pd.DataFrame | Sequence[Mapping]) -> np.ndarray:
        """The float32 feature matrix of ``rows`` (a DataFrame or dicts with the dataset's columns)."""
        df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        missing = [c for c in ("cc", "mode", *NUMERIC) if c not in df.columns]
        if missing:
            raise ConfigError(f"rows lack feature column(s) {missing}")
        unknown_cc = sorted(set(df["cc"]) - set(self.ccs))
        if unknown_cc:
            raise ConfigError(f"congestion control(s) {unknown_cc} were not in the training data "
                              f"(known: {list(self.ccs)})", field="cc")
        unknown_mode = sorted(set(df["mode"]) - set(self.modes))
        if unknown_mode:
            raise ConfigError(f"mode(s) {unknown_mode} unknown (expected {list(self.modes)})", field="mode")
        n = len(df)
        x = np.zeros((n, len(self.names)), dtype=np.float32)
        x[:, 0] = df["n_receivers"].to_numpy(dtype=np.float32)
        cc = df["cc"].to_numpy()
        for j, c in enumerate(self.ccs):
            x[:, 1 + j] = cc == c
        mode = df["mode"].to_numpy()
        base = 1 + len(self.ccs)
        for j, m in enumerate(self.modes):
            x[:, base + j] = mode == m
        x[:, -2] = df["wifi_throughput_mbit"].to_numpy(dtype=np.float32)
        x[:, -1] = df["lte_throughput_mbit"].to_numpy(dtype=np.float32)
        return x


def target(frame: pd.DataFrame) -> np.ndarray:
    """Energy in joules, float32, shape (n,)."""
    return frame[TARGET].to_numpy(dtype=np.float32)


@dataclass(frozen=True)
class Scaler:
    """Standardisation fitted on training rows only: (x - mean) / scale."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        sd = x.std(axis=0)
        # A constant column (e.g. one cc in a small campaign) would divide by zero.
        sd = np.where(sd > 1e-12, sd, 1.0)
        return cls(tuple(float(v) for v in x.mean(axis=0)), tuple(float(v) for v in sd))
