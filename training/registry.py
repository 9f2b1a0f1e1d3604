"""Registered models: list, promote (aliases), describe versions; loading one by name.

Resolving ``models:/NAME@alias`` / ``models:/NAME/VERSION`` and pulling a verified copy live in
``harness.model_registry`` (the controller, which never imports ``training``, resolves through it
too); this module adds what only the training side does: tag a new version with its scores, list
versions, move aliases, and ``load_energy_model`` (an ``OnnxEnergyModel`` for a reference or a
folder). It never imports torch (a test checks it): MLflow's client and onnxruntime only.
"""
from __future__ import annotations

from pathlib import Path

from harness.mlflow_store import mlflow_client, registry_call
from harness.model_registry import (EXTRA, SUMS_TAG, ModelRef, PulledModel, model_version, cache_root, pull,
                                    resolve_model)

__all__ = ["EXTRA", "SUMS_TAG", "ModelRef", "PulledModel", "cache_root", "list_models", "load_energy_model",
           "promote", "pull", "resolve_model", "tag_version"]


def tag_version(name: str, version: str | int, doc: dict, tracking_uri: str | None = None) -> None:
    """Describe a new version from its model.json: dataset, test scores beside the baselines."""
    o = doc["metrics"]["overall"]
    best = min(o, key=lambda k: o[k]["mape_pct"])
    desc = (f"Dataset `{doc['provenance']['dataset']}` ({doc['provenance']['dataset_digest'][:19]}). Test MAPE: "
            + ", ".join(f"{k} {v['mape_pct']:.3g} %" for k, v in o.items())
            + (f". **{best} beats the MLP on this dataset.**" if best != "mlp" else "."))
    mlflow_client(tracking_uri).update_model_version(name, str(version), description=desc)


def list_models(tracking_uri: str | None = None) -> list[dict]:
    """Registered models and their versions: ``[{name, version, aliases, created, run_id, dataset}]``."""
    client = mlflow_client(tracking_uri)
    out = []
    with registry_call(client.tracking_uri, "list the registered models"):
        for rm in client.search_registered_models():
            aliases: dict[str, list[str]] = {}
            for alias, v in (rm.aliases or {}).items():
                aliases.setdefault(str(v), []).append(alias)
            for mv in sorted(client.search_model_versions(f"name = '{rm.name}'"), key=lambda v: int(v.version)):
                out.append({"name": rm.name, "version": str(mv.version),
                            "aliases": sorted(aliases.get(str(mv.version), [])),
                            "created_ms": mv.creation_timestamp, "run_id": mv.run_id,
                            "dataset_digest": (mv.tags or {}).get("mplab.dataset_digest"),
                            "description": mv.description or ""})
    return out


def promote(name: str, version: str, alias: str = "champion", tracking_uri: str | None = None) -> None:
    """Point ``alias`` at ``version`` of ``name`` (moving it from any other version)."""
    client = mlflow_client(tracking_uri)
    model_version(client, ModelRef(name, version=str(version)))  # a clear error for a missing version
    client.set_registered_model_alias(name, alias, str(version))


def load_energy_model(uri: str | Path, tracking_uri: str | None = None, threads: int = 1):
    """``OnnxEnergyModel`` for a ``models:/`` URI or a folder (controllers open theirs with
    ``controller.model.EnergyModel.open``, through the same resolver)."""
    from training.runtime import OnnxEnergyModel

    return OnnxEnergyModel.load(resolve_model(uri, tracking_uri), threads=threads)
