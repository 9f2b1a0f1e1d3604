"""Benchmark: how long each registry command takes to give up when the MLflow server is down or unknown.

Each command runs as a user runs it (``python -m mplab ...``) with ``MLFLOW_TRACKING_URI`` at a port
nothing listens on (down) or at a host name that does not resolve (unknown), one after the other, or
with ``--parallel`` all at once (for MLflow's unbounded retries, whose minutes are spent waiting out its
back-off; eight Python start-ups at once on a loaded machine inflate short times, so compare short ones
run serially). Printed per command: seconds, exit code, and how many lines it wrote to stderr (one:
mplab's own message).

Run: ``uv run python bench/registry_down.py [--parallel] [--json out.jsonl] [--timeout 600]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rigs.ports import free_port

COMMANDS = {"dataset pull": ["dataset", "pull", "paper@1", "-o", "{tmp}/ds"],
            "dataset list": ["dataset", "list"],
            "models list": ["models", "list"],
            "models pull": ["models", "pull", "models:/energy@champion", "-o", "{tmp}/model"]}


def run(name: str, argv: list[str], uri: str, timeout_s: float) -> dict:
    """One command against ``uri``: its time, exit code and stderr lines."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.format(tmp=tmp) for a in argv]
        t0 = time.monotonic()
        try:
            res = subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True,
                                 timeout=timeout_s, cwd=tmp, env={**os.environ, "MLFLOW_TRACKING_URI": uri})
            rc, err = res.returncode, res.stderr
        except subprocess.TimeoutExpired as exc:
            rc, err = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return {"command": name, "uri": uri, "seconds": round(time.monotonic() - t0, 1), "rc": rc,
                "stderr_lines": len(err.splitlines()), "last_line": (err.strip().splitlines() or [""])[-1][:160]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="append one JSON line per command to this file")
    ap.add_argument("--timeout", type=float, default=600.0, help="give a command up after this long (s)")
    ap.add_argument("--parallel", action="store_true", help="run every command at once")
    a = ap.parse_args()
    uris = {"down": f"http://127.0.0.1:{free_port()}", "unknown": "http://mplab-registry.invalid:5000"}
    jobs = [(name, argv, uri, kind) for kind, uri in uris.items() for name, argv in COMMANDS.items()]
    with ThreadPoolExecutor(len(jobs) if a.parallel else 1) as pool:
        results = list(pool.map(lambda j: {**run(j[0], j[1], j[2], a.timeout), "server": j[3]}, jobs))
    for r in results:
        print(f"{r['server']:8} {r['command']:13} {r['seconds']:7.1f} s  rc {r['rc']}  "
              f"{r['stderr_lines']:4} stderr line(s)  {r['last_line']}")
        if a.json:
            with a.json.open("a") as f:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
