"""Registered models by name: ``models:/NAME@alias`` and ``models:/NAME/VERSION`` resolved to a folder.

The one resolver of model references for every command that takes a model (``mplab controller
decide``, a scenario's ``model:``, ``mplab report --model``, ``mplab run``): ``resolve_model`` turns a
reference into a local folder (a path is returned as it is), pulling the registered version once into
a cache and re-checking its files against their checksums on every call. It lives in ``harness``
because the controller may not import ``training``; ``training.registry`` (promote, list, tag)
builds on it.

A registered model version is the ONNX model MLflow logged for a training run (``mlflow.onnx``
flavour); mplab's own folder (``model.onnx``, ``model.json``, ``card.md``, ..., ``SHA256SUMS``)
travels inside it as the flavour's ``extra_files``. ``pull`` writes that folder exactly as ``mplab
train`` wrote it, after checking every file against ``SHA256SUMS`` and the manifest against the
digest recorded on the version (tag ``mplab.sha256sums``): a copy changed in the artifact store is
refused. MLflow is imported lazily (``harness.mlflow_store``): a path never needs it.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.artifacts import SUMS_NAME, ChecksumMismatch, FolderPolicy, check_output, staged_folder, verify_sums
from harness.errors import ConfigError
from harness.mlflow_store import mlflow_client, quiet_mlflow, registry_call

#: How a model reference starts (MLflow's own URI scheme for registered models).
SCHEME = "models:/"

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


def model_version(client, ref: ModelRef):  # MLflow types, imported lazily
    """The ModelVersion a reference names; a clear error (exit 2) when there is none or the server is not there."""
    from mlflow.exceptions import MlflowException

    try:
        with registry_call(client.tracking_uri, f"look up models:/{ref}", field="MODEL"):
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
    mv = model_version(client, r)
    expected = (mv.tags or {}).get(SUMS_TAG)
    if not expected:
        raise ChecksumMismatch(f"{r.name} version {mv.version} has no {SUMS_TAG} tag: it was not registered by "
                               "`mplab train --register`, so its files cannot be checked")
    check_output(out, "model.json", policy, "model")
    with (tempfile.TemporaryDirectory(prefix="mplab-pull-") as tmp, quiet_mlflow(),
          registry_call(client.tracking_uri, f"download models:/{r}")):
        # NB: a models:/ URI would be resolved against the *default* registry, not this client's;
        # the version's own location is explicit (and only mplab's folder is fetched).
        where = client.get_model_version_download_uri(r.name, mv.version).rstrip("/")
        src = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"{where}/{EXTRA}", dst_path=tmp,
                                                       tracking_uri=client.tracking_uri))
        if not (src / SUMS_NAME).exists():
            raise ChecksumMismatch(f"{r.name} version {mv.version}: no {EXTRA}/{SUMS_NAME} in the model's artifacts")
        digest = verify_sums(src, expected)
        with staged_folder(out, policy) as (folder, previous):
            shutil.copytree(src, folder, dirs_exist_ok=True)
            verify_sums(folder, expected)  # the copy, too
    return PulledModel(r.name, str(mv.version), out, digest, previous[0] if previous else None)


def cache_root() -> Path:
    """Where ``resolve_model`` keeps pulled versions: ``$MPLAB_MODEL_CACHE`` or ``~/.cache/mplab/models``."""
    env = os.environ.get("MPLAB_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mplab" / "models"


def is_reference(text: str | Path) -> bool:
    """Whether ``text`` names a registered model (``models:/...``) rather than a folder."""
    return str(text).startswith(SCHEME)


def pin(ref: str, tracking_uri: str | None = None) -> str:
    """``models:/NAME/VERSION`` for a reference by alias or by name alone (the version it names now).

    A campaign records the pinned form, so a resumed campaign uses the version it started with even
    if the alias has moved since.
    """
    r = ModelRef.parse(ref)
    if r.version:
        return f"{SCHEME}{r.name}/{r.version}"
    mv = model_version(mlflow_client(tracking_uri), r)
    return f"{SCHEME}{r.name}/{mv.version}"


def resolve_model(uri: str | Path, tracking_uri: str | None = None, cache: Path | None = None) -> Path:
    """A model folder for ``models:/NAME@alias``, ``models:/NAME/VERSION`` or a local path.

    Registry references are pulled once per version into ``cache`` (default ``cache_root()``)
    and re-verified against their checksums on every call; an alias is looked up each time, so
    promoting another version takes effect on the next call.
    """
    text = str(uri)
    if not is_reference(text):
        return Path(text).expanduser()
    r = ModelRef.parse(text)
    client = mlflow_client(tracking_uri)
    mv = model_version(client, r)
    folder = (cache or cache_root()) / r.name / str(mv.version)
    if (folder / "model.json").exists():
        verify_sums(folder, (mv.tags or {}).get(SUMS_TAG) or None)
        return folder
    return pull(ModelRef(r.name, version=str(mv.version)), folder, client.tracking_uri).path
