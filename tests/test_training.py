"""Training: fit, evaluation, export (ONNX vs PyTorch), and MLflow on a real store and a real server.

Data: a small synthetic campaign built with the real dataset builder (the emulated campaign
is in test_training_emulated.py, which needs root).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import mlflow
from mlflow.tracking import MlflowClient

from harness.dataset.build import SplitSpec, build_dataset
from harness.errors import ConfigError
from training.export import load_pt, to_onnx
from training.features import FeatureSpec
from training.fit import TrainConfig, fit, predict
from training.pipeline import train
from training.runtime import OnnxEnergyModel
from rigs.synthetic import write_synthetic_campaign
from training.tracking import training_run

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
    hist = client.get_metric_history(res.run_id, "epoch_val_loss")
    assert [m.step for m in hist] == list(range(1, 13))
    assert "test_mape_pct_mlp" in run.data.metrics
    # mplab's folder travels inside the logged ONNX model
    arts = {a.path for a in client.list_logged_model_artifacts(res.model_id, "extra_files")}
    assert {"extra_files/model.onnx", "extra_files/model.json", "extra_files/card.md",
            "extra_files/SHA256SUMS"} <= arts
    # MLFLOW_TRACKING_URI selects another store
    other = tmp_path / "other.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other}")
    res2 = train(dataset, tmp_path / "models" / "m2", TrainConfig(**{**cfg.__dict__, "epochs": 2}),
                 log=lambda *a: None)
    assert MlflowClient(tracking_uri=f"sqlite:///{other}").get_run(res2.run_id).info.status == "FINISHED"
    # ... and only while it is set: the run leaves MLflow's process-wide URI as it found it (unset).
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert not mlflow.is_tracking_uri_set(), mlflow.get_tracking_uri()


def test_a_failing_run_is_recorded_as_failed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'f.db'}"
    with pytest.raises(RuntimeError):
        with training_run("t", tracking_uri=uri) as run:
            run.log_metrics({"x": 1.0}, step=1)
            rid = run.run_id
            raise RuntimeError("boom")
    r = MlflowClient(tracking_uri=uri).get_run(rid)
    assert r.info.status == "FAILED" and r.data.metrics["x"] == 1.0


def test_model_card_says_when_a_baseline_beats_the_mlp(trained):
    from huggingface_hub import ModelCard

    from training.card import render_model_card

    doc = json.loads((trained.path / "model.json").read_text())
    o = doc["metrics"]["overall"]
    for name in o:
        o[name]["mape_pct"] = {"mlp": 8.25, "linear": 6.75, "mean": 20.0, "gbt": 9.0}[name]
    card = render_model_card(doc)
    assert "A simpler baseline beats the MLP" in card and "linear (6.75 %)" in card and "samples per case" in card
    parsed = ModelCard(card)  # as the Hub reads it: front matter into ModelCardData, model-index into eval results
    head = parsed.data.to_dict()
    assert head["pipeline_tag"] == "tabular-regression" and head["datasets"] == [doc["provenance"]["dataset"]]
    mae = {r.metric_type: r.metric_value for r in parsed.data.eval_results}
    assert mae["mae"] == pytest.approx(doc["metrics"]["overall"]["mlp"]["mae_j"], rel=1e-5)
    assert parsed.data.eval_results[0].dataset_revision == doc["provenance"]["dataset_digest"]
    assert "Ramiza Shams" in parsed.text and "doi = {10.3390/s23187699}" in parsed.text
    o["linear"]["mape_pct"] = o["gbt"]["mape_pct"] = 30.0
    fair = render_model_card(doc)
    assert "beats the MLP" not in fair and "lowest test MAPE" in fair


def test_per_case_r2_needs_enough_rows(trained):
    from training.evaluate import MIN_ROWS_FOR_R2, scores

    y = np.array([50.0, 50.5, 49.8])
    assert scores(y, y * 1.02, MIN_ROWS_FOR_R2).r2 is None
    assert scores(y, y * 1.02).r2 is not None  # overall scores keep it
    for c in trained.metrics["per_case"]:
        assert (c["mlp"]["r2"] is None) == (c["mlp"]["n"] < MIN_ROWS_FOR_R2)
    assert "n/a" in (trained.path / "card.md").read_text()


def test_training_defaults_to_fp32(trained):
    assert TrainConfig().precision == "fp32"
    assert json.loads((trained.path / "model.json").read_text())["training"]["precision_used"] == "fp32"


def test_onnx_file_carries_the_feature_order(trained):
    import onnx

    doc = json.loads((trained.path / "model.json").read_text())
    props = {p.key: p.value for p in onnx.load(trained.path / "model.onnx").metadata_props}
    assert json.loads(props["mplab.features"]) == doc["features"]["order"] and props["mplab.output_unit"] == "J"


def test_sweep_commands_import_without_the_training_stack(tmp_path):
    """Without the `train` extra (and here without MLflow's client too): `mplab` and its sweep commands load;
    training and the registry say what is missing. tests/test_wheel.py runs the real base install."""
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'mlflow', 'sklearn', 'onnx'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
from typer.testing import CliRunner
from mplab.cli import app
for args in (['--help'], ['run', '--help'], ['dataset', 'build', '--help'], ['train', '--help']):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, (args, r.output, r.exception)
r = CliRunner().invoke(app, ['dataset', 'list'])
assert "MLflow's client is not installed" in str(r.exception), r.exception
r = CliRunner().invoke(app, ['train', sys.argv[1], '-o', sys.argv[2]])
assert "pip install 'mplab[train]'" in str(r.exception) and r.exception.exit_code == 2, r.exception
print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mlflow', 'sklearn', 'onnx')))
"""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "dataset.json").write_text("{}")  # its arguments pass: the missing stack is what is said
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d"), str(tmp_path / "m")], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "[]"
