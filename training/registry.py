"""Registered models: list, promote (aliases), pull by name and version, and ``models:/`` URIs.

A registered model version is the ONNX model MLflow logged for a training run (``mlflow.onnx``
flavour, with signature); mplab's own folder (``model.onnx``, ``model.json``, ``card.md``, ...,
``SHA256SUMS``) travels inside it as the flavour's ``extra_files``. ``pull`` writes that folder
exactly as ``mplab train`` wrote it, after checking every file against ``SHA256SUMS`` and the
manifest against the digest recorded on the version (tag ``mplab.sha256sums``): a copy changed
in the artifact store is refused.

Controllers call ``resolve_model`` (or ``load_energy_model``) with ``models:/NAME@alias``,
``models:/NAME/VERSION`` or a local folder. This module never imports torch (a test checks it):
it needs MLflow's client and onnxruntime only.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.artifacts import (SUMS_NAME, ChecksumMismatch, FolderPolicy, check_output, staged_folder,
                               verify_sums)
from harness.errors import ConfigError
from harness.mlflow_store import mlflow_client, quiet_mlflow

SUMS_TAG = "mplab.sha256sums"  # sha256 of the version's SHA256SUMS, recorded when it is registered
EXTRA = "extra_files"  # where the ONNX flavour keeps extra files inside the logged model
_REF = re.compile(r"^(?:models:/)?(?P<name>[^@/]+)(?:@(?P<alias>[A-Za-z0-9_\-]+)|/(?P<version>\d+))?$")


@dataclass(frozen=True)
class ModelRef:
    """``NAME@alias``, ``NAME/VERSION`` or ``NAME`` (the latest version)."""

    name: str
    alias: str | None = None
    version: str | None = None

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        m = _REF.match(text.strip())
        if not m:
            raise ConfigError(f"{text!r} is not a model reference; use NAME@alias, NAME/VERSION or "
                              "models:/NAME@alias", field="MODEL")
        return cls(m["name"], m["alias"], m["version"])

    def __str__(self) -> str:
        return self.name + (f"@{self.alias}" if self.alias else f"/{self.version}" if self.version else "")


@dataclass(frozen=True)
class PulledModel:
    name: str
    version: str
    path: Path
    sums_digest: str
    previous: Path | None = None


def _version(client, ref: ModelRef):  # noqa: ANN001, ANN202 - MLflow types, imported lazily
    """The ModelVersion a reference names; a clear error when there is none."""
    from mlflow.exceptions import MlflowException

    try:
        if ref.alias:
            return client.get_model_version_by_alias(ref.name, ref.alias)
        if ref.version:
            return client.get_model_version(ref.name, ref.version)
        versions = client.search_model_versions(f"name = '{ref.name}'")
    except MlflowException as exc:
        raise ConfigError(f"no registered model version {ref} ({exc.message.splitlines()[0]}); "
                          "see `mplab models list`", field="MODEL") from None
    if not versions:
        raise ConfigError(f"no registered model {ref.name!r}; see `mplab models list`", field="MODEL")
    return max(versions, key=lambda v: int(v.version))


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
    for rm in client.search_registered_models():
        aliases: dict[str, list[str]] = {}
        for alias, v in (rm.aliases or {}).items():
            aliases.setdefault(str(v), []).append(alias)
        for mv in sorted(client.search_model_versions(f"name = '{rm.name}'"), key=lambda v: int(v.version)):
            out.append({"name": rm.name, "version": str(mv.version), "aliases": sorted(aliases.get(str(mv.version), [])),
                        "created_ms": mv.creation_timestamp, "run_id": mv.run_id,
                        "dataset_digest": (mv.tags or {}).get("mplab.dataset_digest"),
                        "description": mv.description or ""})
    return out


def promote(name: str, version: str, alias: str = "champion", tracking_uri: str | None = None) -> None:
    """Point ``alias`` at ``version`` of ``name`` (moving it from any other version)."""
    client = mlflow_client(tracking_uri)
    _version(client, ModelRef(name, version=str(version)))  # a clear error for a missing version
    client.set_registered_model_alias(name, alias, str(version))


def pull(ref: str | ModelRef, out: Path, tracking_uri: str | None = None,
         policy: str = FolderPolicy.REFUSE) -> PulledModel:
    """Download a registered version's mplab folder to ``out``, verified.

    Raises:
        ChecksumMismatch: a file differs from SHA256SUMS, or SHA256SUMS from the version's tag.
        ConfigError: no such model, version or alias; ``out`` holds a model and the policy refuses.
    """
    import mlflow.artifacts

    r = ref if isinstance(ref, ModelRef) else ModelRef.parse(ref)
    client = mlflow_client(tracking_uri)
    mv = _version(client, r)
    expected = (mv.tags or {}).get(SUMS_TAG)
    if not expected:
        raise ChecksumMismatch(f"{r.name} version {mv.version} has no {SUMS_TAG} tag: it was not registered by "
                               "`mplab train --register`, so its files cannot be checked")
    check_output(out, "model.json", policy, "model")
    with tempfile.TemporaryDirectory(prefix="mplab-pull-") as tmp, quiet_mlflow():
        # NB: a models:/ URI would be resolved against the *default* registry, not this client's;
        # the version's own location is explicit (and only mplab's folder is fetched).
        where = client.get_model_version_download_uri(r.name, mv.version).rstrip("/")
        src = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"{where}/{EXTRA}", dst_path=tmp,
                                                       tracking_uri=client.tracking_uri))
        if not (src / SUMS_NAME).exists():
            raise ChecksumMismatch(f"{r.name} version {mv.version}: no {EXTRA}/{SUMS_NAME} in the model's artifacts")
        digest = verify_sums(src, expected)
        with staged_folder(out, policy) as (folder, previous):
            for f in src.iterdir():
                shutil.copy2(f, folder / f.name)
            verify_sums(folder, expected)  # the copy, too
    return PulledModel(r.name, str(mv.version), out, digest, previous[0] if previous else None)


def cache_root() -> Path:
    """Where ``resolve_model`` keeps pulled versions: ``$MPLAB_MODEL_CACHE`` or ``~/.cache/mplab/models``."""
    env = os.environ.get("MPLAB_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mplab" / "models"


def resolve_model(uri: str | Path, tracking_uri: str | None = None, cache: Path | None = None) -> Path:
    """A model folder for ``models:/NAME@alias``, ``models:/NAME/VERSION`` or a local path.

    Registry references are pulled once per version into ``cache`` (default ``cache_root()``)
    and re-verified against their checksums on every call; an alias is looked up each time, so
    promoting another version takes effect on the next call.
    """
    text = str(uri)
    if not text.startswith("models:/"):
        return Path(text)
    r = ModelRef.parse(text)
    client = mlflow_client(tracking_uri)
    mv = _version(client, r)
    folder = (cache or cache_root()) / r.name / str(mv.version)
    if (folder / "model.json").exists():
        verify_sums(folder, (mv.tags or {}).get(SUMS_TAG) or None)
        return folder
    return pull(ModelRef(r.name, version=str(mv.version)), folder, client.tracking_uri).path


def load_energy_model(uri: str | Path, tracking_uri: str | None = None, threads: int = 1):  # noqa: ANN201
    """``OnnxEnergyModel`` for a ``models:/`` URI or a folder (what controllers call)."""
    from training.runtime import OnnxEnergyModel

    return OnnxEnergyModel.load(resolve_model(uri, tracking_uri), threads=threads)
