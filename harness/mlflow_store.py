"""The MLflow store where mplab publishes: tracking URI default, local artifact root, experiments.

Training runs (``training.tracking``), published datasets (``harness.dataset.registry``) and
registered models (``training.registry``) all live in one MLflow store: ``$MLFLOW_TRACKING_URI``
(a server, typically) or a local SQLite file. MLflow itself is imported lazily: a lab install
without the training stack imports this module and gets a clear error only when it publishes.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


def default_tracking_uri(cwd: Path | None = None) -> str:
    """Where datasets and models are published: ``$MLFLOW_TRACKING_URI`` or ``sqlite:///<cwd>/mlflow.db``."""
    import os

    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(cwd or Path.cwd()).resolve() / 'mlflow.db'}"


def default_artifact_root(cwd: Path | None = None) -> str:
    """The artifact root of a local store: ``<cwd>/mlartifacts`` (a server decides its own)."""
    return ((cwd or Path.cwd()).resolve() / "mlartifacts").as_uri()


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"  # MLflow 3's "Machine learning" experiments: runs and models


def ensure_experiment(client, name: str, uri: str) -> str:  # an MlflowClient, imported by callers
    """The id of MLflow experiment ``name``, created if absent, tagged as model development.

    MLflow 3's UI files runs of untagged experiments under "Evaluations"; the tag makes it open
    on the runs. A local store gets an explicit artifact root beside its database (not ./mlruns).
    """
    exp = client.get_experiment_by_name(name)
    if exp is None:
        root = default_artifact_root() if uri.startswith(("sqlite:", "file:")) else None
        try:
            return client.create_experiment(name, artifact_location=root, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        except Exception:
            # NB: another process may have created it between our lookup and create.
            got = client.get_experiment_by_name(name)
            if got is None:
                raise
            return got.experiment_id
    if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return exp.experiment_id


def mlflow_client(tracking_uri: str | None = None):  # mlflow is optional: not imported at module level
    """An ``MlflowClient`` on ``tracking_uri`` (default ``default_tracking_uri()``); a clear error without MLflow."""
    from harness.errors import ConfigError

    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError("MLflow's client is not installed: publishing and pulling need it "
                          "(pip install --force-reinstall mlflow-skinny, or make setup)") from None
    return MlflowClient(tracking_uri=tracking_uri or default_tracking_uri())


@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """Silence MLflow's noise that says nothing to mplab's users, for the duration of the block.

    Per-file "Downloading artifacts" progress bars (a dozen while one model is logged), the
    ambiguity warning of its own dataset-source registry for a local path, the hint about
    integer columns in an inferred schema (mplab's columns have no missing values), and the
    note that pip is absent (uv environments have none; the requirements are given explicitly).
    """
    import logging
    import os
    import warnings

    env = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(env)
    os.environ[env] = "false"
    env_log = logging.getLogger("mlflow.utils.environment")
    level = env_log.level
    env_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
            yield
    finally:
        env_log.setLevel(level)
        if before is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = before


def dataset_source(uri: str, tracking_uri: str):  # an mlflow DatasetSource or a path string
    """What ``mlflow.data`` records as a dataset's source for ``uri`` (a local path or an artifact URI).

    MLflow resolves local paths and cloud URIs itself but has no resolver for its own proxied
    ``mlflow-artifacts:`` URIs; those become the HTTP URL the tracking server serves the folder at.
    """
    if uri.startswith("mlflow-artifacts:") and tracking_uri.startswith(("http://", "https://")):
        from mlflow.data.http_dataset_source import HTTPDatasetSource

        path = uri.removeprefix("mlflow-artifacts:").lstrip("/")
        return HTTPDatasetSource(f"{tracking_uri.rstrip('/')}/api/2.0/mlflow-artifacts/artifacts/{path}")
    return uri
