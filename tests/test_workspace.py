"""`mplab init`: a workspace of the installed examples that mplab runs inside.

Each scenario it writes must load with its inventory from within the workspace; a lab workspace's
secrets file is private from its first byte and never overwritten; a directory in use is refused
before anything is written.
"""
from __future__ import annotations

import os
import stat

from typer.testing import CliRunner

from harness.campaign.entry import scenario_inventory
from harness.config.inventory import load_inventory
from harness.config.scenario import load_scenario
from harness.deploy.secrets import load_secrets
from mplab.cli import app, run


def _init(*args: str):
    return CliRunner().invoke(app, ["init", *args])


def _loads_every_scenario(ws):
    names = sorted(p.name for p in (ws / "scenarios").glob("*.yaml"))
    for name in names:
        sc = load_scenario(ws / "scenarios" / name)
        inv = load_inventory(scenario_inventory(sc, ws / "scenarios" / name))
        assert inv is not None
    return names


def test_an_emulated_workspace_runs_every_bundled_scenario(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _init("ws", "--emulated")
    assert res.exit_code == 0, res.output
    ws = tmp_path / "ws"
    assert "quick.yaml" in _loads_every_scenario(ws) and "paper-setup1.yaml" in _loads_every_scenario(ws)
    assert "sudo mplab run scenarios/quick.yaml" in (ws / "NEXT-STEPS.md").read_text()
    assert not (ws / "secrets.yaml").exists()


def test_a_lab_workspace_points_at_its_inventory_and_keeps_its_secrets_private(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _init("lab", "--lab").exit_code == 0
    ws = tmp_path / "lab"
    assert stat.S_IMODE((ws / "secrets.yaml").stat().st_mode) == 0o600
    assert _loads_every_scenario(ws) == ["paper-setup1.yaml", "paper-setup2.yaml"]
    for name in ("paper-setup1.yaml", "paper-setup2.yaml"):
        sc = load_scenario(ws / "scenarios" / name)
        assert scenario_inventory(sc, ws / "scenarios" / name).resolve() == (ws / "inventory" / "lab.yaml").resolve()
    inv = load_inventory(ws / "inventory" / "lab.yaml")
    assert inv.lab.secrets_file == "secrets.yaml"
    monkeypatch.chdir(ws)  # mplab runs inside the workspace: the inventory's secrets file is found from there
    assert load_secrets(inv.lab.secrets_file) is not None
    # filled-in secrets survive a second init, even with --force; the examples are written again
    (ws / "secrets.yaml").write_text("wifi_psk: {mplab-rx: 'filled in by hand'}\n")
    (ws / "scenarios" / "paper-setup1.yaml").unlink()
    monkeypatch.chdir(tmp_path)
    assert _init("lab", "--lab", "--force").exit_code == 0
    assert "filled in by hand" in (ws / "secrets.yaml").read_text()
    assert (ws / "scenarios" / "paper-setup1.yaml").is_file()


def test_a_directory_in_use_or_no_kind_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    (tmp_path / "afile").write_text("x")
    for args, says in ((("busy", "--emulated"), "is not empty"), (("afile", "--lab"), "not a directory"),
                       (("new",), "choose one kind"), (("new", "--lab", "--emulated"), "choose one kind")):
        rc = run(["init", *args])
        err = capsys.readouterr().err
        assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, (args, err)
    assert sorted(os.listdir(tmp_path)) == ["afile", "busy"] and os.listdir(tmp_path / "busy") == ["notes.txt"]
