"""End to end on a real emulated campaign: namespaces, kernel MPTCP, iperf3, emulated meters
-> `mplab dataset build` -> `mplab train` (with a real SQLite MLflow store) -> ONNX.

Root only (namespaces). One small campaign per module: 2 receivers, cubic + reno, 3 modes,
3 samples per case of 2 MiB.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.campaign.campaign import start_campaign
from harness.dataset.build import load_dataset
from harness.upkeep.clean import clean_prefix
from rigs import leaks
from harness.config.scenario import Scenario
from training.export import load_pt
from training.features import FeatureSpec
from training.fit import predict
from training.runtime import OnnxEnergyModel

from conftest import fail_on_leftovers, small_inventory

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    import uuid

    prefix = f"mplab-t{uuid.uuid4().hex[:6]}-"
    inv = small_inventory(prefix, [(20, 8), (7, 14)])
    sc = Scenario(name="tiny", congestion_controls=["cubic", "reno"], receiver_counts=[2],
                  modes=["wifi", "lte", "both"], samples_per_case=3, file_size="2M", transfer_timeout_s=60,
                  retries=1, settle_s=0.1, seed=3)
    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(leaks.MARK, prefix)
        try:
            c = start_campaign(sc, inv, runs, campaign_id="tiny")
        finally:
            clean_prefix(prefix)
    fail_on_leftovers(prefix)
    return c.path


def _mplab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_emulated_campaign_to_dataset_to_model(campaign, tmp_path):
    p = _mplab("dataset", "build", str(campaign), "-o", str(tmp_path / "datasets" / "tiny"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    ds = load_dataset(tmp_path / "datasets" / "tiny")
    df = ds.frame
    assert set(df["testbed_kind"]) == {"emulated"} and set(df["energy_source"]) == {"emulated"}
    assert set(df["mode"]) == {"wifi", "lte", "both"} and set(df["cc"]) == {"cubic", "reno"}
    # per-interface throughput follows the mode (real kernel byte counters)
    wifi_only = df[df["mode"] == "wifi"]
    assert (wifi_only["wifi_throughput_mbit"] > 10 * wifi_only["lte_throughput_mbit"]).all()
    assert (df.groupby("sample_id")["split"].nunique() == 1).all()
    assert len(ds.part("test")) > 0

    p = _mplab("train", str(tmp_path / "datasets" / "tiny"), "-o", str(tmp_path / "models" / "tiny"),
               "--epochs", "300", "--patience", "40", cwd=tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    m = tmp_path / "models" / "tiny"
    doc = json.loads((m / "model.json").read_text())
    o = doc["metrics"]["overall"]
    assert o["mlp"]["mae_j"] < o["mean"]["mae_j"], o  # beats the mean predictor on its test split
    assert doc["provenance"]["dataset_digest"] == ds.digest
    assert (tmp_path / "mlflow.db").exists()

    # ONNX Runtime equals PyTorch on the test rows
    spec = FeatureSpec.from_dict(doc["features"])
    x = spec.matrix(ds.part("test"))
    got = OnnxEnergyModel.load(m).predict_matrix(x)
    want = predict(load_pt(m / "model.pt"), x)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
