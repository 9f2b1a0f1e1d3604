"""Datasets and models by name and version, against a real `mlflow server` on 127.0.0.1.

One working directory builds a dataset, trains and registers a model, and publishes the
dataset; a second one, sharing nothing but the server's URL, lists, pulls the model by alias and
the dataset by version, and gets byte-identical folders. Files changed in the server's artifact
store are refused on pull. The server runs with a SQLite backend and a local artifact root,
one worker and no job runner (about 0.5 GB instead of 3.4 GB); it is stopped by its process
group even when a test fails (``rigs.mlflow_server``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.artifacts import SUMS_NAME, ChecksumMismatch, file_sha256, verify_sums, write_sums
from rigs.mlflow_server import mlflow_server
from mplab.cli import app
from rigs.synthetic import write_synthetic_campaign

from conftest import REPO


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mlflow server`` on a free loopback port: (URI, artifact root). Stopped by its process group."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as srv:
        yield srv.uri, srv.artifacts


def _mplab(args: list[str], cwd: Path, uri: str, monkeypatch, ok: bool = True):
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    res = CliRunner().invoke(app, args, catch_exceptions=True)
    if ok:
        assert res.exit_code == 0, f"mplab {' '.join(args)}: {res.output}\n{res.exception!r}"
    return res


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


@pytest.fixture(scope="module")
def published(server, tmp_path_factory):
    """Working directory A: build, train + register, promote, publish. Returns (uri, artifacts, A)."""
    uri, artifacts = server
    a = tmp_path_factory.mktemp("workdir-a")
    c = write_synthetic_campaign(a / "runs", ccs=("cubic", "lia"), counts=(1, 2, 3), samples=9,
                                 file_bytes=4_000_000, seed=3)
    mp = pytest.MonkeyPatch()
    try:
        _mplab(["dataset", "build", str(c.path), "-o", "datasets/syn", "--train", "6", "--test", "3"], a, uri, mp)
        _mplab(["train", "datasets/syn", "-o", "models/syn", "--register", "energy", "--epochs", "30",
                "--batch-size", "256"], a, uri, mp)
        _mplab(["models", "promote", "energy", "1", "--alias", "champion"], a, uri, mp)
        res = _mplab(["dataset", "publish", "datasets/syn"], a, uri, mp)
        assert "published syn@1" in res.output
        again = _mplab(["dataset", "publish", "datasets/syn"], a, uri, mp)
        assert "already published as syn@1" in again.output
    finally:
        mp.undo()
    return uri, artifacts, a


def test_a_second_workdir_lists_and_pulls_byte_identical_copies(published, tmp_path, monkeypatch):
    uri, _, a = published
    b = tmp_path / "workdir-b"
    b.mkdir()
    models = _mplab(["models", "list"], b, uri, monkeypatch).output
    assert "energy" in models and "champion" in models
    assert "syn" in _mplab(["dataset", "list"], b, uri, monkeypatch).output
    _mplab(["models", "pull", "energy@champion", "-o", "models/syn"], b, uri, monkeypatch)
    _mplab(["dataset", "pull", "syn@1", "-o", "datasets/syn"], b, uri, monkeypatch)
    for kind in ("models/syn", "datasets/syn"):
        got, want = _files(b / kind), _files(a / kind)
        assert got.keys() == want.keys() and SUMS_NAME in got, kind
        assert all(got[k] == want[k] for k in want), kind
    origin = json.loads((b / "datasets/syn/.origin.json").read_text())
    assert origin["name"] == "syn" and origin["version"] == 1
    # the pulled dataset trains again, and the run links the registry copy as its input
    _mplab(["train", "datasets/syn", "-o", "models/again", "--epochs", "3", "--batch-size", "256"], b, uri,
           monkeypatch)
    # an existing folder is refused without --force / --keep-previous
    res = _mplab(["models", "pull", "energy/1", "-o", "models/syn"], b, uri, monkeypatch, ok=False)
    assert res.exit_code != 0 and "already holds a model" in str(res.exception)
    _mplab(["models", "pull", "energy/1", "-o", "models/syn", "--keep-previous"], b, uri, monkeypatch)
    assert len(list((b / "models").glob("syn.*"))) == 1


def test_the_run_is_what_mlflow_users_expect(published, monkeypatch):
    from mlflow import MlflowClient

    uri, _, a = published
    client = MlflowClient(uri)
    mv = client.get_model_version_by_alias("energy", "champion")
    run = client.get_run(mv.run_id)
    tags = run.data.tags
    assert run.info.status == "FINISHED"
    assert tags["mlflow.user"] and tags["mlflow.source.name"] and len(tags["mlflow.source.git.commit"]) == 40
    assert run.info.run_name == "syn <- synthetic"
    (inp,) = run.inputs.dataset_inputs
    digest = json.loads((a / "datasets/syn/dataset.json").read_text())["digest"]
    assert inp.dataset.name == "syn" and digest.removeprefix("sha256:").startswith(inp.dataset.digest)
    assert {t.key: t.value for t in inp.tags}["mplab.digest"] == digest
    # the summary metrics are the kept (best) epoch's, not the last epoch's
    doc = json.loads((a / "models/syn/model.json").read_text())
    kept = doc["training"]["kept"]
    assert run.data.metrics["val_loss"] == pytest.approx(kept["val_loss"])
    hist = client.get_metric_history(run.info.run_id, "epoch_val_loss")
    assert len(hist) == doc["training"]["epochs_run"]
    assert min(h.value for h in hist) == pytest.approx(kept["val_loss"])
    # the ONNX flavour, with a tensor signature, and the feature order inside the ONNX file
    logged = client.get_logged_model(mv.source.removeprefix("models:/"))
    assert logged.source_run_id == run.info.run_id
    import onnx
    import mlflow.artifacts

    # As a user does: the server in MLFLOW_TRACKING_URI (a models:/ URI is resolved by the registry, which
    # follows the tracking URI in effect, not download_artifacts' tracking_uri argument).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    local = Path(mlflow.artifacts.download_artifacts(f"models:/energy/{mv.version}", tracking_uri=uri))
    mlmodel = (local / "MLmodel").read_text()
    assert "onnx:" in mlmodel and "signature:" in mlmodel and "CPUExecutionProvider" in mlmodel
    props = {p.key: p.value for p in onnx.load(local / "extra_files" / "model.onnx").metadata_props}
    assert json.loads(props["mplab.features"]) == doc["features"]["order"]
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_tampered_artifacts_are_refused(published, tmp_path, monkeypatch):
    uri, artifacts, _ = published
    # a model file changed in the artifact store
    from mlflow import MlflowClient

    model_id = MlflowClient(uri).get_model_version_by_alias("energy", "champion").source.removeprefix("models:/")
    (card,) = [p for p in artifacts.rglob("extra_files/card.md") if model_id in p.parts]
    original = card.read_bytes()
    card.write_bytes(original + b"\nedited after publication\n")
    try:
        res = _mplab(["models", "pull", "energy@champion", "-o", "m"], tmp_path, uri, monkeypatch, ok=False)
        assert isinstance(res.exception, ChecksumMismatch) and "card.md" in str(res.exception)
        assert not (tmp_path / "m").exists()
    finally:
        card.write_bytes(original)
    # a dataset file and its manifest changed together: the published digest still catches it
    (csv,) = [p for p in artifacts.rglob("dataset/data.csv")]
    folder = csv.parent
    saved = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    try:
        (folder / "README.md").write_text("a different card\n")
        write_sums(folder)
        res = _mplab(["dataset", "pull", "syn@1", "-o", "d"], tmp_path, uri, monkeypatch, ok=False)
        assert isinstance(res.exception, ChecksumMismatch) and "registry recorded" in str(res.exception)
    finally:
        for name, data in saved.items():
            (folder / name).write_bytes(data)
    _mplab(["dataset", "pull", "syn@1", "-o", "d"], tmp_path, uri, monkeypatch)  # restored: accepted again


def test_controllers_resolve_models_uris_without_torch(published, tmp_path):
    uri, _, _ = published
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'sklearn'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
from training.registry import load_energy_model
m = load_energy_model('models:/energy@champion', tracking_uri={uri!r})
rows = [{{'n_receivers': 2, 'cc': m.spec.ccs[0], 'mode': 'both', 'wifi_throughput_mbit': 9.0,
         'lte_throughput_mbit': 7.5}}]
print(float(m.predict(rows)[0]))
"""
    env = {**os.environ, "MPLAB_MODEL_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert float(p.stdout.split()[-1]) > 0
    assert (tmp_path / "cache" / "energy" / "1" / "model.onnx").exists()


def test_checksums_catch_changed_missing_and_extra_files(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00\x01")
    digest = write_sums(tmp_path)
    assert verify_sums(tmp_path, digest) == digest
    assert (tmp_path / SUMS_NAME).read_text().splitlines()[0] == f"{file_sha256(tmp_path / 'a.txt')}  a.txt"
    (tmp_path / "a.txt").write_text("b")
    with pytest.raises(ChecksumMismatch, match="a.txt"):
        verify_sums(tmp_path)
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "c.txt").write_text("new")
    with pytest.raises(ChecksumMismatch, match="not in"):
        verify_sums(tmp_path)
    (tmp_path / "c.txt").unlink()
    (tmp_path / "sub" / "b.bin").unlink()
    with pytest.raises(ChecksumMismatch, match="missing"):
        verify_sums(tmp_path)
    with pytest.raises(ChecksumMismatch, match="registry recorded"):
        verify_sums(tmp_path, "sha256:" + "0" * 64)


def _cli(args: list[str], uri: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MPLAB_MODEL_CACHE": str(cache), "MPLAB_LOG": "ERROR"}
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=env)


def test_controller_decide_and_scenarios_take_registered_models(published, tmp_path, monkeypatch):
    """`controller decide --model models:/energy@champion` end to end against the server, by alias and by
    version; an unknown alias and an absent server are one line each, exit 2; a scenario names it too."""
    from harness.config.scenario import Scenario

    from controller.setup2 import Setup2Control

    uri, _, _ = published
    probes = ["--cc", "cubic", "--probe", "n1=9,8.5", "--probe", "n2=4,11"]
    for ref in ("models:/energy@champion", "models:/energy/1"):
        res = _cli(["controller", "decide", "--model", ref, *probes, "--json"], uri, tmp_path / "cache")
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads(res.stdout)
        assert doc["model"]["source"] == ref and doc["policy"] == "ref-is-tuned"
        assert Path(doc["model"]["path"]) == tmp_path / "cache" / "energy" / "1"
        assert set(doc["assignment"]) == {"n1", "n2"} and "is_energy_total_j" in doc["trace"]
    verify_sums(tmp_path / "cache" / "energy" / "1")  # the cached copy is the registered folder, checked
    table = _cli(["controller", "decide", "--model", "models:/energy@champion", *probes], uri, tmp_path / "cache")
    assert table.returncode == 0 and "models:/energy@champion" in table.stdout.replace("\n", "")
    for ref, needle in (("models:/energy@nope", "no registered model version energy@nope"),
                        ("models:/energy/7", "no registered model version energy/7")):
        bad = _cli(["controller", "decide", "--model", ref, *probes], uri, tmp_path / "cache")
        assert bad.returncode == 2 and needle in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    gone = _cli(["controller", "decide", "--model", "models:/energy@champion", "--tracking-uri", "http://127.0.0.1:9",
                 *probes], uri, tmp_path / "cache-2")
    assert gone.returncode == 2 and "cannot reach the MLflow tracking server" in gone.stderr, gone.stderr
    sc = Scenario.model_validate({
        "schema_version": 1, "name": "by-name", "inventory": "../inventory/emulated.yaml",
        "congestion_controls": ["cubic"], "receiver_counts": [2], "policies": ["ref-is-tuned"],
        "model": "models:/energy@champion", "samples_per_case": 1, "file_size": "4000000"})
    monkeypatch.setenv("MPLAB_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    got = Setup2Control.from_scenario(sc).describe()
    # a campaign records the version the alias names when it starts, so --resume keeps using it
    from harness.config.scenario import with_model_resolved

    assert with_model_resolved(sc, tmp_path / "s.yaml").model == "models:/energy/1"
    assert got["model_source"] == "models:/energy@champion" and got["model_onnx_sha256"]
    assert got["model"] == str(tmp_path / "cache" / "energy" / "1")


@pytest.mark.parametrize("args, what", [
    (["dataset", "list"], "to list the published datasets"),
    (["dataset", "pull", "paper@1", "-o", "ds"], "to look up dataset paper@1"),
    (["models", "list"], "to list the registered models"),
    (["models", "pull", "models:/energy@champion", "-o", "m"], "to look up models:/energy@champion"),
])
def test_registry_commands_with_the_server_down_fail_with_one_line(args, what, tmp_path):
    """No server at the URI: every registry command stops after the bounded retry (MLflow's own 7 retries with
    backoff took over 4 minutes, past this subprocess's deadline) with one line naming the URI, exit 2."""
    from rigs.ports import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST_")}
    res = subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**env, "MLFLOW_TRACKING_URI": uri})
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: ") and f"cannot reach the MLflow tracking server at {uri} {what}; start it" in line
