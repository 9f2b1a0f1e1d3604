"""Training: fit, evaluation, export (ONNX vs PyTorch), and MLflow on a real store and a real server.

Data: a small synthetic campaign built with the real dataset builder (the emulated campaign
is in test_training_emulated.py, which needs root).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from harness.dataset.build import SplitSpec, build_dataset
from harness.errors import ConfigError
from training.export import load_pt, to_onnx
from training.features import FeatureSpec
from training.fit import TrainConfig, fit, predict
from training.pipeline import train
from training.runtime import OnnxEnergyModel
from harness.testing.synthetic import write_synthetic_campaign
from training.tracking import tracked_run

from conftest import REPO

FAST = TrainConfig(epochs=150, patience=15, patience_min_steps=0, batch_size=256, lr=3e-3)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("synth")
    c = write_synthetic_campaign(d / "runs", ccs=("cubic", "lia"), counts=(1, 2, 3), samples=9,
                                 file_bytes=4_000_000, seed=3)
    build_dataset([c.path], d / "ds", SplitSpec(train=6, test=3))
    return d / "ds"


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("m") / "model"
    return train(dataset, out, FAST, track=False, log=lambda *a: None)


def test_mlp_beats_the_mean_predictor_and_reports_baselines(trained):
    o = trained.metrics["overall"]
    assert set(o) == {"mlp", "mean", "linear", "gbt"}
    assert o["mlp"]["mae_j"] < 0.5 * o["mean"]["mae_j"]
    assert o["mlp"]["r2"] > 0.8
    assert trained.metrics["per_case"] and all("mlp" in c for c in trained.metrics["per_case"])
    doc = json.loads((trained.path / "model.json").read_text())
    assert doc["provenance"]["dataset_digest"].startswith("sha256:")
    assert doc["features"]["order"][0] == "n_receivers" and len(doc["scaler"]["x_mean"]) == len(
        doc["features"]["order"])
    assert doc["architecture"]["hidden"] == 5 and doc["architecture"]["width"] == 200
    card = (trained.path / "card.md").read_text()
    assert "gbt" in card and doc["provenance"]["dataset_digest"] in card


def test_exported_onnx_equals_pytorch(trained):
    model = trained.fit.model
    spec = FeatureSpec.from_dict(json.loads((trained.path / "model.json").read_text())["features"])
    rng = np.random.default_rng(0)
    x = np.zeros((500, len(spec.names)), dtype=np.float32)
    x[:, 0] = rng.integers(1, 10, 500)
    x[np.arange(500), 1 + rng.integers(0, len(spec.ccs), 500)] = 1
    x[np.arange(500), 1 + len(spec.ccs) + rng.integers(0, 3, 500)] = 1
    x[:, -2:] = rng.uniform(0, 40, (500, 2))
    want = predict(model, x)
    ort = OnnxEnergyModel.load(trained.path)
    got = ort.predict_matrix(x)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5), np.abs(got - want).max()
    # model.pt reproduces the same function
    again = load_pt(trained.path / "model.pt")
    assert np.array_equal(predict(again, x), want)
    # the dict interface a controller uses builds the same features
    rows = [{"n_receivers": 2, "cc": spec.ccs[0], "mode": "both", "wifi_throughput_mbit": 9.0,
             "lte_throughput_mbit": 7.5}]
    assert ort.predict(rows)[0] == pytest.approx(predict(model, spec.matrix(rows))[0], rel=1e-5, abs=1e-5)


def test_onnx_export_of_a_different_model_differs():
    """The equality check can fail: two differently seeded models give different ONNX outputs."""
    from training.features import Scaler
    from training.model import Architecture, build_model

    s = Scaler((0.0,) * 4, (1.0,) * 4)
    a = build_model(Architecture(4), s, Scaler((0.0,), (1.0,)), seed=1)
    b = build_model(Architecture(4), s, Scaler((0.0,), (1.0,)), seed=2)
    import onnxruntime as ort

    sess = ort.InferenceSession(to_onnx(a).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).normal(size=(20, 4)).astype(np.float32)
    got = sess.run(None, {"features": x})[0].reshape(-1)
    assert np.allclose(got, predict(a, x), rtol=1e-5, atol=1e-5)
    assert not np.allclose(got, predict(b, x), rtol=1e-5, atol=1e-5)


def test_runtime_needs_no_torch(trained):
    code = ("import sys, json; from training.runtime import OnnxEnergyModel; "
            f"m = OnnxEnergyModel.load({str(trained.path)!r}); "
            "spec = m.spec; "
            "print(float(m.predict([{'n_receivers': 1, 'cc': spec.ccs[0], 'mode': 'wifi', "
            "'wifi_throughput_mbit': 10.0, 'lte_throughput_mbit': 0.0}])[0])); "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    energy, has_torch = p.stdout.split()
    assert float(energy) > 0 and has_torch == "False"


def test_training_is_deterministic_for_a_seed():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], dtype=np.float32) + 5).astype(np.float32)
    cfg = TrainConfig(epochs=3, patience=3, batch_size=32, hidden=2, width=16, seed=7)
    a = fit(x[:150], y[:150], x[150:], y[150:], cfg)
    b = fit(x[:150], y[:150], x[150:], y[150:], cfg)
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    c = fit(x[:150], y[:150], x[150:], y[150:], TrainConfig(**{**cfg.__dict__, "seed": 8}))
    assert not torch.equal(a.model.net[0].weight, c.model.net[0].weight)


def test_unknown_congestion_control_is_a_clear_error():
    spec = FeatureSpec(ccs=("cubic", "lia"))
    with pytest.raises(ConfigError, match="bbr"):
        spec.matrix([{"n_receivers": 1, "cc": "bbr", "mode": "wifi", "wifi_throughput_mbit": 1.0,
                      "lte_throughput_mbit": 0.0}])
    with pytest.raises(ConfigError, match="patience"):
        TrainConfig(patience=0)


def _run_of(client: MlflowClient, run_id: str):
    return client.get_run(run_id)


def test_runs_appear_in_a_sqlite_mlflow_store(dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = TrainConfig(**{**FAST.__dict__, "epochs": 12, "patience": 50})
    res = train(dataset, tmp_path / "models" / "m1", cfg, log=lambda *a: None)
    assert (tmp_path / "mlflow.db").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = _run_of(client, res.run_id)
    assert run.info.status == "FINISHED"
    digest = json.loads((dataset / "dataset.json").read_text())["digest"]
    assert run.data.params["dataset_digest"] == digest
    assert run.data.tags["mplab.dataset_digest"] == digest
    assert run.data.params["train.width"] == "200"
    hist = client.get_metric_history(res.run_id, "val_loss")
    assert [m.step for m in hist] == list(range(1, 13))
    assert "test_mape_pct_mlp" in run.data.metrics
    arts = {a.path for a in client.list_artifacts(res.run_id, "model")}
    assert {"model/model.onnx", "model/model.json", "model/card.md", "model/model.pt"} <= arts
    # MLFLOW_TRACKING_URI selects another store
    other = tmp_path / "other.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other}")
    res2 = train(dataset, tmp_path / "models" / "m2", TrainConfig(**{**cfg.__dict__, "epochs": 2}),
                 log=lambda *a: None)
    assert MlflowClient(tracking_uri=f"sqlite:///{other}").get_run(res2.run_id).info.status == "FINISHED"


def test_a_failing_run_is_recorded_as_failed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'f.db'}"
    with pytest.raises(RuntimeError):
        with tracked_run("t", tracking_uri=uri) as run:
            run.log_metrics({"x": 1.0}, step=1)
            rid = run.run_id
            raise RuntimeError("boom")
    r = MlflowClient(tracking_uri=uri).get_run(rid)
    assert r.info.status == "FAILED" and r.data.metrics["x"] == 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_runs_appear_on_an_mlflow_server_on_loopback(dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    port = _free_port()
    argv = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination", str(tmp_path / "server-artifacts")]
    log = open(tmp_path / "server.log", "wb")
    # No job-execution workers (about 3 GB less); the server still needs 16-60 s to answer /health, more on a
    # loaded 2-core machine (one full-suite run here took over 90 s), so the deadline is generous.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not come up: {(tmp_path / 'server.log').read_text()[-2000:]}")
            time.sleep(0.3)
        res = train(dataset, tmp_path / "models" / "srv", TrainConfig(**{**FAST.__dict__, "epochs": 3}),
                    tracking_uri=uri, experiment="mplab-server-test", log=lambda *a: None)
        client = MlflowClient(tracking_uri=uri)
        run = client.get_run(res.run_id)
        assert run.info.status == "FINISHED"
        assert len(client.get_metric_history(res.run_id, "train_loss")) == 3
        assert "model/model.onnx" in {a.path for a in client.list_artifacts(res.run_id, "model")}
        assert (tmp_path / "server.db").exists()
    finally:
        # Stop the server's whole process group (it forks workers), SIGTERM then SIGKILL.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "server still listening"
