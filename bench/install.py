"""What a user installs: the wheel's size and files, the base install beside `[train]`, and a transcript.

Builds the wheel (``uv build``), installs it into fresh venvs outside the checkout (dependencies pinned
to uv.lock, as tests/test_wheel.py does): once without extras, once with ``[train]``; prints each venv's
size on disk, then runs a user's first commands with the base install from an empty directory and
prints them with their output (``--transcript``), a dataset published and pulled by name through a
real MLflow server among them.

    uv run python bench/install.py [--train] [--transcript] [--keep DIR]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from rigs.mlflow_server import mlflow_server
from rigs.synthetic import write_synthetic_campaign
from rigs.wheel import build_wheel, install_wheel, user_env



def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def transcript(venv: Path, root: Path) -> None:
    env = user_env(venv)
    work = root / "empty"
    work.mkdir()

    def show(*args: str, cwd: Path = work, env_: dict = env) -> None:
        res = subprocess.run(["mplab", *args], cwd=cwd, env=env_, capture_output=True, text=True, timeout=1800)
        print(f"$ mplab {' '.join(args)}    # in {cwd.relative_to(root)}, rc {res.returncode}")
        print((res.stdout + res.stderr).rstrip())
        print()

    show("--version")
    show("doctor")
    show("init", "ws", "--emulated")
    show("run", "scenarios/paper-setup1.yaml", "--dry-run", "--speedup", "auto", "--testbeds", "2", cwd=work / "ws")
    write_synthetic_campaign(work / "ws" / "runs", "syn", ccs=("lia", "cubic"), counts=(1, 2), samples=4)
    show("dataset", "build", "runs/syn", "-o", "datasets/syn", "--train", "3", "--test", "1", cwd=work / "ws")
    with mlflow_server(root / "server") as srv:
        with_server = {**env, "MLFLOW_TRACKING_URI": srv.uri}
        show("dataset", "publish", "datasets/syn", cwd=work / "ws", env_=with_server)
        other = work / "elsewhere"
        other.mkdir()
        show("dataset", "pull", "syn@1", "-o", "datasets/syn", cwd=other, env_=with_server)
    show("train", "datasets/syn", "-o", "models/syn", cwd=work / "ws")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", action="store_true", help="also install [train] and print its size")
    ap.add_argument("--transcript", action="store_true", help="run a user's first commands with the base install")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary directory)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="mplab-install-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        wheel = build_wheel(root / "dist")
        names = sorted(zipfile.ZipFile(wheel).namelist())
        print(f"wheel: {wheel.name}, {wheel.stat().st_size / 1e6:.2f} MB, {len(names)} files")
        for top in sorted({n.split("/")[0] for n in names}):
            inside = [n for n in names if n.startswith(top + "/")]
            data = [n for n in inside if not n.endswith(".py")]
            print(f"  {top + '/':24} {len(inside):4} files ({len(data)} data: "
                  f"{', '.join(sorted({n.rsplit('.', 1)[-1] for n in data})) or '-'})")
        base = install_wheel(wheel, root / "venv-base")
        print(f"base install:    {size_mb(base):8.0f} MB  ({base})")
        if args.train:
            train = install_wheel(wheel, root / "venv-train", "train")
            print(f"[train] install: {size_mb(train):8.0f} MB  ({train})")
        if args.transcript:
            print()
            transcript(base, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
