"""Loading an exported model with onnxruntime alone (no PyTorch): what controllers use.

Example::

    from training.runtime import OnnxEnergyModel
    m = OnnxEnergyModel.load("models/quick")
    m.predict([{"n_receivers": 3, "cc": "cubic", "mode": "both",
                "wifi_throughput_mbit": 12.0, "lte_throughput_mbit": 9.5}])   # -> array of joules

This module must not import torch (a test checks it).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ConfigError
from harness.modelfile import MODEL_SCHEMA_VERSION, read_model_json
from harness.onnxrt import open_session
from training.features import FeatureSpec

INPUT_NAME = "features"
OUTPUT_NAME = "energy_j"
__all__ = ["INPUT_NAME", "MODEL_SCHEMA_VERSION", "OUTPUT_NAME", "OnnxEnergyModel"]


@dataclass
class OnnxEnergyModel:
    """An exported model: its ONNX Runtime session and model.json."""

    session: object
    meta: dict
    spec: FeatureSpec

    @classmethod
    def load(cls, model_dir: str | Path, threads: int = 1) -> OnnxEnergyModel:
        """Open ``models/<name>/`` (model.onnx + model.json); ``threads`` bounds ONNX Runtime's pools."""
        d = Path(model_dir)
        meta = read_model_json(d)  # the one reader of model.json (harness.modelfile)
        try:
            spec = FeatureSpec.from_dict(meta["features"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"malformed features section ({exc})", source=str(d / "model.json"),
                              field="features") from None
        # The controller's set-up (controller.model.EnergyModel opens it the same way): harness.onnxrt.
        sess = open_session(d / "model.onnx", threads)
        return cls(sess, meta, spec)

    def predict_matrix(self, x: np.ndarray) -> np.ndarray:
        """Energy (J) for feature rows already in model.json's order, shape (n,)."""
        out = self.session.run([OUTPUT_NAME], {INPUT_NAME: np.ascontiguousarray(x, dtype=np.float32)})[0]
        return out.reshape(-1)

    def predict(self, rows: Sequence[Mapping]) -> np.ndarray:
        """Energy (J) for rows with n_receivers, cc, mode, wifi_throughput_mbit, lte_throughput_mbit."""
        return self.predict_matrix(self.spec.matrix(rows))
