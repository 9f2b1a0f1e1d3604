"""mplab's wheel as users get it: built from this checkout, installed into a fresh venv outside it.

The venv's dependencies are pinned to uv.lock (``uv export``), so what is installed is what the lock
says, not whatever PyPI has newest. ``user_env`` is the environment a user's shell would give the
venv's commands: its ``bin`` first on PATH, nothing of the checkout or another venv. Used by
tests/test_wheel.py and bench/install.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Variables that would point a command at this checkout, its venv or a tracking server.
NOT_INHERITED = ("VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT", "MLFLOW_TRACKING_URI")


class WheelError(RuntimeError):
    """A build or install step failed: its command and the end of its stderr."""


def _uv(*args: str, cwd: Path, **extra_env: str) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise WheelError("uv is not on PATH (make setup installs it)")
    env = {**{k: v for k, v in os.environ.items() if k not in NOT_INHERITED}, **extra_env}
    res = subprocess.run([uv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if res.returncode != 0:
        raise WheelError(f"uv {' '.join(args)}: rc {res.returncode}\n{res.stderr[-3000:]}")


def build_wheel(out: Path, tmpdir: Path | None = None) -> Path:
    """``uv build --wheel`` of this checkout into ``out`` (its hook compiles the shipped BPF objects);
    ``tmpdir``: the build's TMPDIR (what it leaves there is the caller's to see)."""
    _uv("build", "--wheel", "--out-dir", str(out), cwd=REPO, **({"TMPDIR": str(tmpdir)} if tmpdir else {}))
    (whl,) = out.glob("mplab-*.whl")
    return whl


def install_wheel(wheel: Path, venv: Path, extra: str | None = None) -> Path:
    """A new venv at ``venv`` with ``wheel`` (and ``extra``), every dependency pinned to uv.lock."""
    pins = venv.with_name(f"{venv.name}-pins.txt")
    _uv("export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "-o", str(pins),
        *(["--extra", extra] if extra else []), cwd=REPO)
    _uv("venv", "--python", sys.executable, str(venv), cwd=venv.parent)
    _uv("pip", "install", "--python", str(venv / "bin" / "python"), "-c", str(pins),
        f"{wheel}[{extra}]" if extra else str(wheel), cwd=venv.parent)
    return venv


def user_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell with ``venv``'s commands first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return {**env, **extra}
