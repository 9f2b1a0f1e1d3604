"""The command line starts light: `mplab --help`, `status` and a dry run import none of the heavy libraries
(bench/cli_startup.py measures what that saves), and the help still lists every command.

The suite spawns `mplab` hundreds of times and is CPU-bound: each command pays for everything ``mplab.cli``
imports. A command imports what it needs when it runs (mplab/commands/*), and ``mplab.cli`` hands the
controller and lte's drivers to commands only when they look them up (``mplab.cli.Wiring``).
"""
from __future__ import annotations

import json
import subprocess
import sys

import typer
from typer.testing import CliRunner

from harness.campaign.store import SCHEMA_VERSION, Campaign
from mplab.cli import Wiring, app

from conftest import REPO

#: Libraries no command needs merely to start (seconds of CPU between them: scipy.stats alone is over one).
HEAVY = ("numpy", "scipy", "pandas", "pyarrow", "matplotlib", "paramiko", "fabric", "jinja2", "torch", "onnxruntime",
         "mlflow", "sklearn", "ray", "pymongo", "starlette", "uvicorn", "huggingface_hub")
#: Our own packages the command line reaches only through a command that needs them.
SIDES = ("controller", "lte", "wifi", "training", "analysis")

# Runs ``mplab ARGS`` in this process, then prints which of MODULES it imported (as JSON).
PROBE = """
import contextlib, io, json, sys
from mplab.cli import run
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    rc = run(sys.argv[2:])
print(json.dumps({"rc": rc, "imported": sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)}))
"""


def imported_by(args: list[str], modules: tuple[str, ...]) -> tuple[int, list[str]]:
    """(exit code, which of ``modules`` are imported) after ``mplab ARGS`` in a fresh interpreter."""
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules), *args], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.splitlines()[-1])
    return out["rc"], out["imported"]


def test_importing_the_command_line_loads_no_heavy_library():
    p = subprocess.run([sys.executable, "-c", "import json, sys, mplab.cli; print(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    loaded = {m.split(".")[0] for m in json.loads(p.stdout)}
    assert sorted(loaded & {*HEAVY, *SIDES, "pydantic", "yaml"}) == []


def test_help_and_version_load_no_heavy_library():
    for args in (["--help"], ["--version"], ["run", "-h"], ["dataset", "build", "-h"]):
        assert imported_by(args, (*HEAVY, *SIDES)) == (0, []), args


def test_status_loads_no_heavy_library(tmp_path):
    # Two receivers' records in one case: a mean with an interval (scipy) if the summary computed one.
    c = Campaign.create(tmp_path, "c1", {"plan": ["a-s001"], "testbed": {"kind": "emulated"}})
    c.append([{"schema_version": SCHEMA_VERSION, "sample_id": "a-s001", "receiver": rx, "n_receivers": 2,
               "case_id": "a", "cc": "lia", "mode": "wifi", "sample_status": "ok", "status": "ok", "flags": [],
               "throughput_mbit": rate, "energy_j": 5.0, "mean_power_w": 3.0, "energy_source": "emulated"}
              for rx, rate in (("n1", 10.0), ("n2", 12.0))])
    assert imported_by(["status", str(c.path)], (*HEAVY, *SIDES)) == (0, [])


def test_a_dry_run_loads_neither_ssh_nor_lte_nor_numpy():
    # The controller's factory is looked up (a scenario with policies would need it), but not its energy
    # model; lte's drivers are not (a dry run builds no testbed).
    rc, imported = imported_by(["run", "scenarios/quick.yaml", "--dry-run"], (*HEAVY, *SIDES, "controller.model"))
    assert rc == 0 and imported == ["controller"]


def test_the_wiring_hands_out_the_real_objects():
    from controller.setup2 import control_factory
    from lte.hostcheck import version_checks
    from lte.realcell import ACCESS_KINDS

    wiring = Wiring()
    assert dict(wiring) == {"access_kinds": ACCESS_KINDS, "control_factory": control_factory,
                            "lte_preflight": version_checks}
    assert wiring.get("nothing") is None


def test_the_help_lists_every_command():
    def names(args: list[str]) -> set[str]:
        res = CliRunner().invoke(app, [*args, "-h"], terminal_width=200)
        assert res.exit_code == 0, (args, res.output)
        # A row of the Commands panel starts "│ NAME"; a wrapped description starts with spaces after the border.
        return {line[2:].split()[0] for line in res.output.splitlines() if line.startswith("│ ") and line[2:3].strip()}

    root = typer.main.get_command(app)
    assert set(root.commands) >= {"run", "status", "clean", "preflight", "doctor", "calibrate", "meters", "lte",
                                  "wifi", "cc", "dataset", "train", "models", "controller", "report", "watch"}
    assert names([]) >= set(root.commands)
    for group, cmd in root.commands.items():
        if hasattr(cmd, "commands"):
            assert names([group]) >= set(cmd.commands), group


def test_an_emulated_meter_builds_the_power_profile_not_the_whole_inventory():
    """Each emulated receiver runs a meter process of its own (``python -m harness.meters.emulated``); it needs the
    power profile and the line format (``harness.config.metering``), not the inventory's other models."""
    probe = "import json, sys, harness.meters.emulated; print(json.dumps(sorted(sys.modules)))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    loaded = set(json.loads(p.stdout))
    assert "harness.config.metering" in loaded
    assert sorted(loaded & {"harness.config.inventory", "harness.config.radio", "harness.config.switch",
                            *HEAVY}) == []
