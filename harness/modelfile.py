"""An exported energy model on disk: a folder with ``model.onnx`` and ``model.json``, read in one place.

``mplab train`` writes the folder (``training.export``, ``training.pipeline``); every reader goes
through ``read_model_json`` here: the controller (``controller.model.EnergyModel``), the training
side's checker and the report (``training.runtime.OnnxEnergyModel``). It refuses, with one line
naming the file (exit 2), a folder that is not an exported model, a model.json that is not JSON or
not an object, and a schema_version this mplab does not read. What each reader needs beyond that
(the controller's feature check, the validity section) it checks itself.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.errors import ConfigError

#: model.json schema versions this mplab reads (``<=``); training writes this one.
MODEL_SCHEMA_VERSION = 1
META_NAME, ONNX_NAME = "model.json", "model.onnx"


def read_model_json(folder: str | Path) -> dict:
    """``folder/model.json``, checked: the folder holds model.onnx too, the file is a JSON object of a
    schema_version we read. ``ConfigError`` (exit 2) naming the file otherwise."""
    d = Path(folder)
    meta_path = d / META_NAME
    if not meta_path.is_file() or not (d / ONNX_NAME).is_file():
        raise ConfigError(f"{d} is not an exported model (needs {ONNX_NAME} and {META_NAME}); train one with "
                          "`mplab train`, or name a registered one as models:/NAME@alias", field="model")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not JSON ({exc})", source=str(meta_path)) from None
    if not isinstance(meta, dict):
        raise ConfigError(f"not a JSON object (got {type(meta).__name__})", source=str(meta_path))
    v = meta.get("schema_version")
    if not isinstance(v, int) or isinstance(v, bool) or v > MODEL_SCHEMA_VERSION:
        raise ConfigError(f"model schema_version {v!r} is not one this mplab reads (<= {MODEL_SCHEMA_VERSION})",
                          source=str(meta_path), field="schema_version")
    return meta
