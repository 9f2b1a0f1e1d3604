"""MLflow tracking through an explicit client: one run per training, ended FINISHED or FAILED.

The store is ``MLFLOW_TRACKING_URI`` when set (any MLflow server or store), else a local SQLite
file ``mlflow.db`` in the working directory (gitignored), with artifacts under ``mlartifacts/``.
`make mlflow-ui` serves that store on 127.0.0.1.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

DEFAULT_EXPERIMENT = "mplab-energy"
MAX_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch
FLUSH_EVERY_S = 5.0


def default_tracking_uri(cwd: Path | None = None) -> str:
    """``$MLFLOW_TRACKING_URI`` or ``sqlite:///<cwd>/mlflow.db``."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(cwd or Path.cwd()).resolve() / 'mlflow.db'}"


def default_artifact_root(cwd: Path | None = None) -> str:
    return ((cwd or Path.cwd()).resolve() / "mlartifacts").as_uri()


class TrackedRun:
    """A live MLflow run: parameters, metrics per step, tags and artifacts go through one client."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self._pending: list[Metric] = []
        self._flushed_at = time.monotonic()

    def log_params(self, params: Mapping[str, object]) -> None:
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 90):  # 100 params per batch at most
            self.client.log_batch(self.run_id, params=items[i:i + 90])

    def set_tags(self, tags: Mapping[str, object]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Queue metrics; flushed every few seconds or when the batch is full (one SQLite transaction
        per epoch would dominate small runs, while the UI should still follow a long one)."""
        ts = int(time.time() * 1000)
        self._pending += [Metric(k, float(v), ts, step) for k, v in metrics.items()]
        if len(self._pending) >= MAX_BATCH or time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        self._flushed_at = time.monotonic()
        while self._pending:
            chunk, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)

    def log_artifacts(self, local_dir: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(self.run_id, str(local_dir), artifact_path)


@contextlib.contextmanager
def tracked_run(experiment: str = DEFAULT_EXPERIMENT, run_name: str | None = None,
                tracking_uri: str | None = None) -> Iterator[TrackedRun]:
    """Start a run; it ends FINISHED, or FAILED if the body raises (and the error propagates)."""
    uri = tracking_uri or default_tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        # A local store gets an explicit artifact root next to the database (not ./mlruns);
        # a server decides its own.
        root = default_artifact_root() if uri.startswith("sqlite:") or uri.startswith("file:") else None
        try:
            exp_id = client.create_experiment(experiment, artifact_location=root)
        except Exception:
            # NB: another process may have created it between our lookup and create.
            got = client.get_experiment_by_name(experiment)
            if got is None:
                raise
            exp_id = got.experiment_id
    else:
        exp_id = exp.experiment_id
    run = client.create_run(exp_id, run_name=run_name)
    tr = TrackedRun(client, run.info.run_id)
    try:
        yield tr
        tr.flush()
    except BaseException:
        with contextlib.suppress(Exception):
            tr.flush()
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    client.set_terminated(run.info.run_id, status="FINISHED")
