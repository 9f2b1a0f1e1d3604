"""Wheel build hook: the BPF congestion controls and the build's commit go into the wheel.

The BPF objects are CO-RE (compiled against the building machine's BTF, relocated by libbpf at
load time), so a lab machine that installs the wheel needs no clang, bpftool or kernel headers.
``make`` builds them from ``harness/cc/bpf`` (the Makefile's ``SHIPPED_BPF`` names which); the
objects are gitignored build products, so they are added as artifacts. ``harness/_build.json``
records the version and the commit the wheel was built from (``mplab --version``; records'
provenance). An editable install (a developer's checkout) gets neither: it reads git itself.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: Set to 1 to build a wheel without the BPF objects (a machine without BTF or clang); the wheel's
#: `mplab doctor` then says they are missing, and coupled congestion controls are refused at preflight.
WITHOUT_BPF = "MPLAB_WHEEL_WITHOUT_BPF"


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


class CustomBuildHook(BuildHookInterface):
    """Build and add the shipped BPF objects; write the build's commit."""

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        if os.environ.get(WITHOUT_BPF) != "1":
            names = subprocess.run(["make", "-s", "--no-print-directory", "print-shipped-bpf"], cwd=root,
                                   capture_output=True, text=True, check=True).stdout.split()
            objs = [f"harness/cc/bpf/build/{n}.bpf.o" for n in names]
            res = subprocess.run(["make", "--no-print-directory", *objs], cwd=root, capture_output=True, text=True,
                                 check=False)
            if res.returncode != 0:
                raise RuntimeError(f"building the BPF objects for the wheel failed (needs the kernel's BTF, clang, "
                                   f"bpftool; or set {WITHOUT_BPF}=1):\n{res.stdout}{res.stderr}")
            build_data["artifacts"].extend(objs)
        commit = os.environ.get("MPLAB_BUILD_COMMIT") or _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
        info = {"version": self.metadata.version, "commit": commit, "dirty": bool(dirty) if dirty is not None else None}
        self._tmp = Path(tempfile.mkdtemp(prefix="mplab-build-"))
        (self._tmp / "_build.json").write_text(json.dumps(info) + "\n")
        build_data["force_include"][str(self._tmp / "_build.json")] = "harness/_build.json"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        """The wheel holds its copy of _build.json now: its temporary directory goes."""
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
