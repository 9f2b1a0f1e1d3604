"""What this installation of mplab is: its version and the commit it was built from.

A wheel carries ``harness/_build.json``, written when it was built (``hatch_build.py``). A
developer's editable checkout has none: there the commit is read from git, with whether the work
tree has uncommitted changes. Either way the answer goes into every campaign's manifest and
``mplab --version``.
"""
from __future__ import annotations

import json
import subprocess
from importlib import metadata

from harness.resources import package_path

BUILD_FILE = package_path("harness", "_build.json")


def version() -> str:
    """mplab's installed version (the wheel's metadata), or ``unknown`` when not installed."""
    try:
        return metadata.version("mplab")
    except metadata.PackageNotFoundError:
        return "unknown"


def _checkout_git() -> dict | None:
    root = package_path("harness").parent
    if not (root / ".git").exists():
        return None

    def g(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()

    return {"commit": g("rev-parse", "HEAD"), "dirty": bool(g("status", "--porcelain", "--untracked-files=no")),
            "source": "checkout"}


def build_info() -> dict | None:
    """``{"commit", "dirty", "source"}``: from the wheel's build file, else the checkout's git; None if neither."""
    if BUILD_FILE.is_file():
        info = json.loads(BUILD_FILE.read_text())
        return {"commit": info.get("commit"), "dirty": info.get("dirty"), "source": "wheel"}
    return _checkout_git()


def describe() -> str:
    """One line for ``mplab --version``: ``mplab 0.1.0 (commit abc1234, wheel)``."""
    info = build_info()
    if info is None or not info.get("commit"):
        return f"mplab {version()} (commit unknown)"
    dirty = ", uncommitted changes" if info.get("dirty") else ""
    return f"mplab {version()} (commit {info['commit'][:12]}{dirty}, {info['source']})"
