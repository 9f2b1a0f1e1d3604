"""Helpers of the fault suite (bad input, kills, signals, disk faults): run the real command line in a subprocess."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def mplab(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m mplab ARGS``: exit code, stdout and stderr as a user sees them."""
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)
