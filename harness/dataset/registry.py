"""Published datasets: versioned, digest-checked copies where the MLflow tracking server keeps artifacts.

``publish`` stores ``datasets/<name>/`` as version N of dataset ``name``: one MLflow run per
version in the experiment ``mplab-datasets`` (run name ``<name> v<N>``), the folder as the run's
artifacts under ``dataset/``, the table linked as the run's input (``mlflow.data``), and tags
naming the version, the dataset digest and the sha256 of its ``SHA256SUMS``. Publishing the same
content again returns the existing version. ``pull`` downloads a version, checks every file
against ``SHA256SUMS`` and the manifest against the tag (a copy changed in the artifact store is
refused) and writes the folder byte for byte, plus ``.origin.json`` (outside the manifest) saying
where it came from, so a model trained on it links the registry copy as its input.

NB: two publishers of the same name at the same moment may both take version N; the second is
then refused on pull as ambiguous rather than silently shadowing the first.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.artifacts import (SUMS_NAME, ChecksumMismatch, FolderPolicy, check_output, staged_folder, verify_sums,
                               write_sums)
from harness.errors import ConfigError
from harness.files import atomic_write
from harness.mlflow_store import dataset_source, ensure_experiment, mlflow_client, quiet_mlflow, registry_call

EXPERIMENT = "mplab-datasets"
ARTIFACT_DIR = "dataset"
TAG_NAME, TAG_VERSION = "mplab.dataset.name", "mplab.dataset.version"
TAG_DIGEST, TAG_SUMS = "mplab.dataset.digest", "mplab.sha256sums"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class DatasetVersion:
    name: str
    version: int
    digest: str
    sums_digest: str
    run_id: str
    rows: int | None
    created_ms: int
    uri: str  # the artifact URI of the published folder


def _versions(client, name: str | None = None) -> list[DatasetVersion]:  # MlflowClient
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    flt = f"tags.`{TAG_NAME}` = '{name}'" if name else ""
    out = []
    page = None
    while True:
        runs = client.search_runs([exp.experiment_id], filter_string=flt, max_results=1000, page_token=page)
        for r in runs:
            t = r.data.tags
            if r.info.status != "FINISHED" or TAG_VERSION not in t:
                continue
            out.append(DatasetVersion(t[TAG_NAME], int(t[TAG_VERSION]), t.get(TAG_DIGEST, ""), t.get(TAG_SUMS, ""),
                                      r.info.run_id, int(t["mplab.dataset.rows"]) if "mplab.dataset.rows" in t else None,
                                      r.info.start_time, f"{r.info.artifact_uri}/{ARTIFACT_DIR}"))
        page = runs.token
        if not page:
            break
    return sorted(out, key=lambda v: (v.name, v.version))


def list_datasets(tracking_uri: str | None = None) -> list[DatasetVersion]:
    """Every published version of every dataset, by name then version."""
    client = mlflow_client(tracking_uri)
    with registry_call(client.tracking_uri, "list the published datasets"):
        return _versions(client)


def publish(folder: Path, name: str | None = None, tracking_uri: str | None = None) -> tuple[DatasetVersion, bool]:
    """Publish ``folder`` (a dataset) as the next version of ``name`` (default: the folder's name).

    Returns:
        The version, and whether it is new (False: the same content was already published).
    """
    from harness.dataset.build import load_dataset

    ds = load_dataset(folder)  # digest, checksums, schema: never publish a broken dataset
    name = name or ds.meta["name"]
    if not _NAME.match(name):
        raise ConfigError(f"dataset name {name!r}: use letters, digits, '.', '_' and '-'", field="--name")
    if not (folder / SUMS_NAME).exists():
        write_sums(folder)  # a dataset built before SHA256SUMS existed: checked above by its CSV digest
    sums = verify_sums(folder)
    client = mlflow_client(tracking_uri)
    with registry_call(client.tracking_uri, f"publish dataset {name}"):
        existing = _versions(client, name)
    for v in existing:
        if v.sums_digest == sums:
            return v, False
    version = max((v.version for v in existing), default=0) + 1
    exp_id = ensure_experiment(client, EXPERIMENT, client.tracking_uri)
    tags = {TAG_NAME: name, TAG_VERSION: str(version), TAG_DIGEST: ds.digest, TAG_SUMS: sums,
            "mplab.dataset.rows": str(len(ds.frame)),
            "mplab.campaigns": ",".join(s["campaign"] for s in ds.meta.get("sources", []))[:4000],
            "mlflow.note.content": f"Dataset `{name}` version {version}: {len(ds.frame)} rows, digest `{ds.digest}`. "
                                   f"Pull it with `mplab dataset pull {name}@{version} -o datasets/{name}`."}
    run = client.create_run(exp_id, run_name=f"{name} v{version}", tags=tags)
    rid = run.info.run_id
    try:
        with quiet_mlflow():
            client.log_artifacts(rid, str(folder), ARTIFACT_DIR)
            _log_input(client, rid, ds, f"{run.info.artifact_uri}/{ARTIFACT_DIR}")
    except BaseException:
        client.set_terminated(rid, status="FAILED")
        raise
    client.set_terminated(rid, status="FINISHED")
    got = [v for v in _versions(client, name) if v.run_id == rid]
    return got[0], True


def _log_input(client, run_id: str, ds, uri: str) -> None:
    """Link the table as the run's input (what the UI shows under "Datasets")."""
    import mlflow.data
    from mlflow.entities import DatasetInput, InputTag

    d = mlflow.data.from_pandas(ds.frame, source=dataset_source(uri, client.tracking_uri), targets="energy_j",
                                name=ds.meta["name"],
                                digest=ds.digest.removeprefix("sha256:")[:32])
    # NB: the client API takes entities; _to_mlflow_entity is how mlflow.log_input converts one too.
    client.log_inputs(run_id, datasets=[DatasetInput(d._to_mlflow_entity(),
                                                     [InputTag("mlflow.data.context", "published"),
                                                      InputTag("mplab.digest", ds.digest)])])


def parse_ref(text: str) -> tuple[str, int | None]:
    """``NAME`` (latest) or ``NAME@VERSION``."""
    name, sep, ver = text.partition("@")
    if not _NAME.match(name) or (sep and not ver.isdigit()):
        raise ConfigError(f"{text!r} is not a dataset reference; use NAME or NAME@VERSION (a number)", field="DATASET")
    return name, int(ver) if sep else None


def pull(ref: str, out: Path, tracking_uri: str | None = None, policy: str = FolderPolicy.REFUSE) -> DatasetVersion:
    """Download version ``ref`` (``NAME[@VERSION]``) to ``out``, every file verified.

    Raises:
        ChecksumMismatch: a file differs from SHA256SUMS, or SHA256SUMS from the published digest.
        ConfigError: unknown name or version; ``out`` holds a dataset and the policy refuses.
    """
    import mlflow.artifacts

    name, version = parse_ref(ref)
    client = mlflow_client(tracking_uri)
    with registry_call(client.tracking_uri, f"look up dataset {ref}", field="DATASET"):
        versions = _versions(client, name)
    if not versions:
        raise ConfigError(f"no published dataset {name!r}; see `mplab dataset list`", field="DATASET")
    version = version or max(v.version for v in versions)
    match = [v for v in versions if v.version == version]
    if not match:
        raise ConfigError(f"dataset {name} has no version {version} (versions: "
                          f"{', '.join(str(v.version) for v in versions)})", field="DATASET")
    if len(match) > 1:
        raise ConfigError(f"dataset {name} version {version} was published twice at once (runs "
                          f"{', '.join(v.run_id for v in match)}); publish again to get a distinct version")
    v = match[0]
    if not v.sums_digest:
        raise ChecksumMismatch(f"dataset {name} version {version} has no {TAG_SUMS} tag: cannot check it")
    check_output(out, "dataset.json", policy, "dataset")
    with (tempfile.TemporaryDirectory(prefix="mplab-pull-") as tmp, quiet_mlflow(),
          registry_call(client.tracking_uri, f"download dataset {ref}")):
        got = Path(mlflow.artifacts.download_artifacts(run_id=v.run_id, artifact_path=ARTIFACT_DIR, dst_path=tmp,
                                                       tracking_uri=client.tracking_uri))
        verify_sums(got, v.sums_digest)
        with staged_folder(out, policy) as (folder, _previous):
            shutil.copytree(got, folder, dirs_exist_ok=True)  # with data/ (one Parquet file per split)
            verify_sums(folder, v.sums_digest)
            atomic_write(folder / ".origin.json", (json.dumps(
                {"name": name, "version": version, "uri": v.uri, "run_id": v.run_id, "sums": v.sums_digest,
                 "tracking_uri": client.tracking_uri}, indent=2) + "\n").encode())
    return v
