"""Screenshots of the MLflow UI as mplab fills it: run page, registered model version, experiment.

    uv run python docs/mlflow-ui/capture.py [OUT_DIR]     # default: docs/mlflow-ui/

Starts a throw-away ``mlflow server`` on 127.0.0.1 (``rigs.mlflow_server``), builds a
small synthetic dataset, trains and registers a model (``--register energy``), promotes it to
``champion`` and publishes the dataset, then photographs three pages with headless Chromium
(Debian package ``chromium``). ``--virtual-time-budget`` lets the single-page app finish loading
(without it the pictures show loading placeholders); the UI's ``users/current`` 404 is expected.
MLflow 3.17's UI picks its "GenAI" or "Model training" view from the URL (``workflowType``) or
the browser's last choice, not from the experiment's tag; the links carry ``ML_VIEW``, and
``experiment-default-view.png`` shows what a first visit without it looks like.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.dataset.build import SplitSpec, build_dataset
from harness.dataset.registry import publish
from rigs.mlflow_server import mlflow_server
from rigs.synthetic import write_synthetic_campaign
from training.fit import TrainConfig
from training.pipeline import train
from training.registry import promote

from training.tracking import ML_VIEW

WINDOW = "1600,1300"
BUDGET_MS = "30000"


def chromium_screenshot_argv(url: str, png: Path) -> list[str]:
    """Headless Chromium writing one screenshot of ``url``."""
    return ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WINDOW}",
            f"--virtual-time-budget={BUDGET_MS}", f"--screenshot={png}", url]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mplab-ui-") as tmp_s:
        tmp = Path(tmp_s)
        with mlflow_server(tmp / "server") as srv:
            os.environ["MLFLOW_TRACKING_URI"] = srv.uri
            os.chdir(tmp)
            c = write_synthetic_campaign(tmp / "runs", campaign="synthetic-20261124T0000Z", ccs=("cubic", "lia"),
                                         counts=(1, 2, 3), samples=9, file_bytes=4_000_000, seed=3)
            build_dataset([c.path], tmp / "datasets" / "syn", SplitSpec(train=6, test=3))
            res = train(tmp / "datasets" / "syn", tmp / "models" / "syn", TrainConfig(epochs=60, batch_size=256),
                        register="energy")
            promote("energy", res.registered[1], "champion")
            publish(tmp / "datasets" / "syn")
            from mlflow import MlflowClient

            run = MlflowClient(srv.uri).get_run(res.run_id)
            exp = run.info.experiment_id
            ml = f"?{ML_VIEW}"
            pages = {"run.png": f"{srv.uri}/#/experiments/{exp}/runs/{res.run_id}{ml}",
                     "model-version.png": f"{srv.uri}/#/models/energy/versions/{res.registered[1]}{ml}",
                     "experiment.png": f"{srv.uri}/#/experiments/{exp}{ml}",
                     "experiment-default-view.png": f"{srv.uri}/#/experiments/{exp}"}
            for name, url in pages.items():
                argv = chromium_screenshot_argv(url, out / name)
                print("$", " ".join(argv), flush=True)
                subprocess.run(argv, check=True, timeout=300, capture_output=True)
                print(f"{out / name}: {url}")
        shutil.rmtree(tmp / "server", ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
