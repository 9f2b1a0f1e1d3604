"""The MLflow store where mplab publishes: tracking URI default, local artifact root, experiments.

Training runs (``training.tracking``), published datasets (``harness.dataset.registry``) and
registered models (``training.registry``) all live in one MLflow store: ``$MLFLOW_TRACKING_URI``
(a server, typically) or a local SQLite file. MLflow itself is imported lazily: a lab install
without the training stack imports this module and gets a clear error only when it publishes.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def default_tracking_uri(cwd: Path | None = None) -> str:
    """Where datasets and models are published: ``$MLFLOW_TRACKING_URI`` or ``sqlite:///<cwd>/mlflow.db``."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(cwd or Path.cwd()).resolve() / 'mlflow.db'}"


def default_artifact_root(cwd: Path | None = None) -> str:
    """The artifact root of a local store: ``<cwd>/mlartifacts`` (a server decides its own)."""
    return ((cwd or Path.cwd()).resolve() / "mlartifacts").as_uri()


#: MLflow retries a refused connection 7 times with exponential backoff (over 4 minutes before it gives up);
#: every registry command is interactive, so unless the user set these, one retry and a 30 s deadline.
FAIL_FAST = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
             "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}

#: What MLflow's error says when the server is down, unknown or silent (requests' words, wrapped by MLflow).
_UNREACHABLE = ("Max retries exceeded", "Connection refused", "Failed to establish", "Name or service not known",
                "Temporary failure in name resolution", "Failed to resolve", "timed out")


@contextlib.contextmanager
def fail_fast() -> Iterator[None]:
    """MLflow's HTTP retries bounded (``FAIL_FAST``) for the block, where the user has not set them."""
    unset = [k for k in FAIL_FAST if k not in os.environ]
    os.environ.update({k: FAIL_FAST[k] for k in unset})
    try:
        yield
    finally:
        for k in unset:
            os.environ.pop(k, None)


def unreachable(exc: BaseException) -> bool:
    """Whether an MLflow error means its server could not be reached (down, unknown, not answering)."""
    return any(s in str(exc) for s in _UNREACHABLE)


@contextlib.contextmanager
def registry_call(tracking_uri: str, what: str, field: str | None = None) -> Iterator[None]:
    """Talk to the MLflow store at ``tracking_uri`` to ``what`` (e.g. "list the published datasets"):
    retries bounded (``fail_fast``), and a server that cannot be reached becomes one line (``ConfigError``:
    the URI is the user's input) instead of MLflow's traceback. Other errors pass unchanged."""
    import logging

    from harness.errors import ConfigError

    # urllib3 logs each retry as a WARNING of several lines; the outcome is said once, below.
    pool_log = logging.getLogger("urllib3.connectionpool")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    try:
        with fail_fast():
            yield
    except Exception as exc:
        if not unreachable(exc):
            raise
        raise ConfigError(f"cannot reach the MLflow tracking server at {tracking_uri} to {what}; start it, or set "
                          "--tracking-uri / $MLFLOW_TRACKING_URI", field=field) from None
    finally:
        pool_log.setLevel(level)


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
