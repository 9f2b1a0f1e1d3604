"""A real ``mlflow server`` on 127.0.0.1 for tests and scripts: started, waited for, stopped by its pid.

SQLite backend and a local artifact root in a directory of the caller's, one worker and no
job runner: MLflow's defaults start 15 processes and use about 3.4 GB, this about 0.5 GB.
Readiness is ``/health`` answering 200, with a deadline (16 s on a quiet machine, about 60 s on
a busy one). The server runs in its own session; it is stopped by its process group (SIGTERM,
then SIGKILL), even when the caller's block raises. Test/bench rig: the library never imports it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import NotReady
from harness.hosts.ready import wait_until
from rigs.ports import free_port

HEALTH_DEADLINE_S = 300.0  # over 90 s seen on a loaded machine


class ServerStartError(NotReady):
    """The server exited or did not answer /health before the deadline."""


@dataclass(frozen=True)
class MlflowServer:
    uri: str
    artifacts: Path  # the server's artifact root (proxied to clients)
    pid: int


@contextlib.contextmanager
def mlflow_server(root: Path, deadline_s: float = HEALTH_DEADLINE_S) -> Iterator[MlflowServer]:
    """Run ``mlflow server`` with its store in ``root`` (server.db, artifacts/, server.log)."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'server.db'}", "--artifacts-destination", str(root / "artifacts")]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    uri = f"http://127.0.0.1:{port}"
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=root)
        try:
            wait_until(lambda: _healthy(uri), deadline_s, f"mlflow server on {uri} answering /health", proc=proc,
                       poll_s=0.5, detail=lambda: (root / "server.log").read_text()[-2000:], error=ServerStartError)
            yield MlflowServer(uri, root / "artifacts", proc.pid)
        finally:
            _stop(proc)


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (it forks a worker), SIGKILL after 20 s; idempotent."""
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
