"""mplab as users install it: the wheel, in a fresh venv outside the checkout, run from empty directories.

The wheel is built from this checkout (``uv build``, whose hook compiles the BPF objects into it) and
installed without extras into a new venv, its dependencies pinned to ``uv.lock``. Every command runs
with the venv's ``mplab`` from an empty temporary directory, with nothing of the checkout on
``sys.path`` or as the working directory: a file read from the checkout, a default relative to it,
a missing package-data file or a hard dependency on the training stack fails here.
"""
from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.upkeep.clean import clean_prefix
from mplab.cli import app
from rigs.mlflow_server import mlflow_server
from rigs.synthetic import write_synthetic_campaign
from rigs.wheel import build_wheel, install_wheel, user_env

from conftest import REPO

#: What the code reads at run time: each must be in the wheel.
PACKAGE_DATA = (
    "harness/data/paper/sensors-2023-7699.yaml", "harness/data/paper/citations.yaml",
    "harness/data/paper/related-schemes.yaml", "harness/emulation/speedup-validation.json",
    "harness/dataset/card_template.md", "training/card_template.md", "harness/watch/page/index.html",
    "lte/templates/srsran/enb.conf.j2", "wifi/templates/hostapd.conf.j2", "harness/_build.json",
    "mplab/workspace/scenarios/quick.yaml", "mplab/workspace/inventory/emulated.yaml",
    *(f"harness/cc/bpf/build/{cc}.bpf.o" for cc in ("lia", "olia", "balia", "wvegas", "timers", "cubic")),
)
#: Research code and bench-only objects: never in the wheel.
NOT_SHIPPED = re.compile(r"^(rigs|tests|bench|docs)/|^harness/cc/(sim|oracle|calc)\.py$|"
                         r"/(vegas|calc)\.bpf\.[co]$|vmlinux\.h$")
TINY = """\
schema_version: 1
name: tiny
inventory: ../inventory/emulated.yaml
congestion_controls: [cubic]
receiver_counts: [1]
modes: [both]
samples_per_case: 2
file_size: 1M
transfer_timeout_s: 60
settle_s: 0.1
seed: 3
"""


def _run(argv: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel, and the directory the build had as its TMPDIR."""
    tmp = tmp_path_factory.mktemp("build-tmp")
    return build_wheel(tmp_path_factory.mktemp("dist"), tmpdir=tmp), tmp


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[0]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """The wheel without extras in a new venv; the environment its commands run in (checkout out of reach)."""
    root = tmp_path_factory.mktemp("install")
    venv = install_wheel(wheel, root / "venv")
    (root / "home").mkdir()
    env = user_env(venv, HOME=str(root / "home"))
    return {"venv": venv, "env": env, "mplab": str(venv / "bin" / "mplab"), "python": str(venv / "bin" / "python")}


def test_the_wheel_carries_what_the_code_reads_and_nothing_of_the_research(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [p for p in PACKAGE_DATA if p not in names] == []
    assert sorted(n for n in names if NOT_SHIPPED.search(n)) == []


def test_the_build_leaves_nothing_in_its_temporary_directory(built):
    """The hook's _build.json goes into the wheel from a temporary directory: every build used to leave one behind."""
    assert sorted(p.name for p in built[1].iterdir()) == []


def test_the_base_install_runs_from_anywhere_without_the_training_stack(installed, tmp_path):
    env = installed["env"]
    # the venv's own copy, not the checkout's
    where = _run([installed["python"], "-c", "import harness, mplab; print(harness.__file__); import sys; print(sys.path)"],
                 tmp_path, env)
    assert where.returncode == 0, where.stderr
    assert str(installed["venv"]) in where.stdout.splitlines()[0]
    assert str(REPO) not in where.stdout
    assert _run([installed["python"], "-c", "import torch"], tmp_path, env).returncode != 0
    version = _run([installed["mplab"], "--version"], tmp_path, env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert version.returncode == 0 and version.stdout.startswith("mplab 0.") and head[:12] in version.stdout
    assert "wheel" in version.stdout
    # a command that needs an extra says which, in one line, and writes nothing
    write_synthetic_campaign(tmp_path / "runs", "syn", ccs=("cubic",), counts=(1,), samples=2)
    assert _run([installed["mplab"], "dataset", "build", "runs/syn", "-o", "datasets/syn", "--train", "1",
                 "--test", "1"], tmp_path, env).returncode == 0
    train = _run([installed["mplab"], "train", "datasets/syn", "-o", "models/m"], tmp_path, env)
    assert train.returncode == 2, train.stderr
    assert "pip install 'mplab[train]'" in train.stderr and len(train.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["datasets", "runs"]


def test_datasets_and_models_by_name_with_the_base_install(installed, tmp_path, monkeypatch):
    env = installed["env"]
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write_synthetic_campaign(a / "runs", "syn", ccs=("lia", "cubic"), counts=(1, 2), samples=4)
    built = _run([installed["mplab"], "dataset", "build", "runs/syn", "-o", "datasets/syn", "--train", "3",
                  "--test", "1"], a, env)
    assert built.returncode == 0, built.stderr
    with mlflow_server(tmp_path / "server") as srv:
        env = {**env, "MLFLOW_TRACKING_URI": srv.uri}
        pub = _run([installed["mplab"], "dataset", "publish", "datasets/syn"], a, env)
        assert pub.returncode == 0 and "published syn@1" in pub.stdout + pub.stderr, pub.stderr
        pulled = _run([installed["mplab"], "dataset", "pull", "syn@1", "-o", "datasets/syn"], b, env)
        assert pulled.returncode == 0, pulled.stderr
        # a model trained and registered where the training stack is (this checkout), pulled by the base install
        monkeypatch.chdir(a)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", srv.uri)
        trained = CliRunner().invoke(app, ["train", "datasets/syn", "-o", "models/syn", "--register", "energy",
                                           "--epochs", "5", "--batch-size", "256"])
        assert trained.exit_code == 0, trained.output
        listed = _run([installed["mplab"], "models", "list"], b, env)
        assert listed.returncode == 0 and "energy" in listed.stdout, listed.stderr
        model = _run([installed["mplab"], "models", "pull", "energy/1", "-o", "models/energy"], b, env)
        assert model.returncode == 0, model.stderr
        assert (b / "models/energy/model.onnx").read_bytes() == (a / "models/syn/model.onnx").read_bytes()
        # the controller decides with ONNX Runtime alone
        decide = _run([installed["mplab"], "controller", "decide", "--model", "models/energy", "--cc", "lia",
                       "--probe", "n1=12,9.5", "--probe", "n2=3,8"], b, env)
        assert decide.returncode == 0, decide.stderr
        assert "n1" in decide.stdout and "n2" in decide.stdout, decide.stdout
    files = {p.relative_to(a / "datasets/syn"): p.read_bytes() for p in (a / "datasets/syn").rglob("*") if p.is_file()}
    assert files and all((b / "datasets/syn" / rel).read_bytes() == data for rel, data in files.items())


@pytest.mark.root
def test_doctor_init_a_campaign_its_dataset_and_report_from_an_empty_directory(installed, tmp_path):
    env, mplab = installed["env"], installed["mplab"]
    doctor = _run([mplab, "doctor"], tmp_path, env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "BPF congestion controls built" in doctor.stdout and "FAIL" not in doctor.stdout
    assert "pip install 'mplab[train]'" in doctor.stdout  # the extra it lacks, named whole
    init = _run([mplab, "init", "ws", "--emulated"], tmp_path, env)
    assert init.returncode == 0, init.stderr
    ws = tmp_path / "ws"
    (ws / "scenarios" / "tiny.yaml").write_text(TINY)
    inv = ws / "inventory" / "emulated.yaml"
    prefix = f"mplab-whl{os.getpid() % 10000}-"
    inv.write_text(inv.read_text().replace("namespace_prefix: mplab-\n", f"namespace_prefix: {prefix}\n"))
    assert prefix in inv.read_text()
    try:
        run = _run([mplab, "run", "scenarios/tiny.yaml", "--id", "tiny-1"], ws, env)
    finally:
        clean_prefix(prefix)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    built = _run([mplab, "dataset", "build", "runs/tiny-1", "-o", "datasets/tiny", "--train", "1", "--test", "1"],
                 ws, env)
    assert built.returncode == 0, built.stderr
    report = _run([mplab, "report", "runs/tiny-1", "datasets/tiny", "-o", "reports/tiny"], ws, env)
    assert report.returncode == 0, report.stderr[-3000:]
    assert (ws / "reports/tiny/index.html").stat().st_size > 10_000
    dry = _run([mplab, "run", "scenarios/paper-setup1.yaml", "--dry-run", "--speedup", "auto", "--testbeds", "2"],
               ws, env)
    assert dry.returncode == 0, dry.stderr
    assert "estimated wall time" in dry.stdout
