"""MLflow tracking as its users expect: one ``mlflow.start_run`` per training, ended FINISHED or FAILED.

Runs go through MLflow's fluent API so that MLflow fills in what its UI shows ("Created by",
"Source", the git commit) from its own context providers; mplab adds the commit of its checkout
when MLflow cannot find one (an installed entry point outside the repository). Per-epoch
metrics are batched through the run's client (one SQLite transaction per epoch would dominate
small runs, while the UI should still follow a long one).

The store is ``MLFLOW_TRACKING_URI`` when set (any MLflow server or store), else a local SQLite
file ``mlflow.db`` in the working directory (gitignored), with artifacts under ``mlartifacts/``.
`make mlflow-ui` serves that store on 127.0.0.1. Experiments are tagged as model development
(``mlflow.experimentKind``): MLflow 3's UI otherwise files training runs under "Evaluations".
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from harness.mlflow_store import default_tracking_uri, ensure_experiment, quiet_mlflow

DEFAULT_EXPERIMENT = "mplab-energy"
# MLflow 3.17's UI chooses its "GenAI" or "Model training" view from this URL parameter (or the
# browser's last choice; GenAI on a first visit), whatever the experiment's kind tag says.
ML_VIEW = "workflowType=machine_learning"
MAX_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch
FLUSH_EVERY_S = 5.0


class TrainingRun:
    """The live run: parameters, tags and batched per-step metrics through one client."""

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self._pending: list[Metric] = []
        self._flushed_at = time.monotonic()

    def log_params(self, params: Mapping[str, object]) -> None:
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 90):  # 100 params per batch at most
            self.client.log_batch(self.run_id, params=items[i:i + 90])

    def set_tags(self, tags: Mapping[str, object]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Queue metrics; flushed every few seconds or when the batch is full."""
        ts = int(time.time() * 1000)
        self._pending += [Metric(k, float(v), ts, step) for k, v in metrics.items()]
        if len(self._pending) >= MAX_BATCH or time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        self._flushed_at = time.monotonic()
        while self._pending:
            chunk, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)


@contextlib.contextmanager
def training_run(experiment: str = DEFAULT_EXPERIMENT, run_name: str | None = None,
                 tracking_uri: str | None = None, tags: Mapping[str, str] | None = None,
                 description: str | None = None) -> Iterator[TrainingRun]:
    """``mlflow.start_run`` on ``tracking_uri``: the run ends FINISHED, or FAILED if the body raises.

    Args:
        experiment: experiment name (created if absent).
        run_name: shown in the UI's run list; make it tell campaigns apart.
        tracking_uri: the store; default ``default_tracking_uri()``.
        tags: extra run tags (they win over MLflow's own context tags).
        description: the run's description (Markdown, shown on the run page).
    """
    uri = tracking_uri or default_tracking_uri()
    # NB: set_tracking_uri also writes MLFLOW_TRACKING_URI into os.environ (and None removes it), so
    # both are put back as they were; a URI that came from the environment is left to the environment
    # (restored with set_tracking_uri it stayed pinned in this process after the variable changed).
    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    if previous == env_before:
        previous = None
    # The fluent API keeps the URI in module state; it is set for this run and put back after.
    mlflow.set_tracking_uri(uri)
    try:
        client = MlflowClient(tracking_uri=uri)
        exp_id = ensure_experiment(client, experiment, uri)
        all_tags = {**_git_tags(), **(tags or {})}
        with quiet_mlflow(), mlflow.start_run(experiment_id=exp_id, run_name=run_name, tags=all_tags,
                                              description=description) as active:
            tr = TrainingRun(client, active.info.run_id, exp_id)
            try:
                yield tr
            finally:
                with contextlib.suppress(Exception):  # best effort on the way out of a failure
                    tr.flush()
    finally:
        mlflow.set_tracking_uri(previous)
        if env_before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env_before


def ui_url(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """The UI page of a run (or experiment), in the "Model training" view.

    A local store has no UI of its own: the link is where `make mlflow-ui` serves it.
    """
    base = tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"
    page = f"#/experiments/{experiment_id}" + (f"/runs/{run_id}" if run_id else "")
    return f"{base}/{page}?{ML_VIEW}"


def _git_tags() -> dict[str, str]:
    """mplab's checkout commit, for runs whose entry point MLflow cannot trace to a repository."""
    from harness.campaign.metadata import git_info, safely

    g = safely("git", git_info)
    if not isinstance(g, dict):
        return {}
    return {"mlflow.source.git.commit": g["commit"], "mplab.git_dirty": str(g["dirty"]).lower()}
