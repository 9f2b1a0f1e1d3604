"""Bad inventories and scenarios are refused before anything runs, naming file, field and reason (exit 2)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.errors import ConfigError
from harness.config.inventory import load_inventory
from harness.campaign.plan import plan_campaign
from harness.config.scenario import load_scenario, parse_size

REPO = Path(__file__).resolve().parent.parent


def _inventory() -> dict:
    return yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())


def _scenario() -> dict:
    return yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def test_shipped_files_are_valid():
    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    assert len(inv.receivers) == 9
    assert inv.emulation.wifi_ap.capacity_mbit == 40 and inv.emulation.lte_cell.capacity_mbit == 36
    rates = [(r.interfaces["wifi"].channel.rate_mbit, r.interfaces["lte"].channel.rate_mbit) for r in inv.receivers]
    assert any(w > 1.1 * lte for w, lte in rates), "some receiver must be better on WiFi"
    assert any(lte > 1.1 * w for w, lte in rates), "some receiver must be better on LTE"
    assert any(abs(w - lte) <= 0.1 * max(w, lte) for w, lte in rates), "some receiver must be within 10%"
    for name in ("quick", "paper-setup1"):
        sc = load_scenario(REPO / "scenarios" / f"{name}.yaml")
        assert plan_campaign(sc, inv)
    paper = load_scenario(REPO / "scenarios" / "paper-setup1.yaml")
    assert paper.file_bytes == 60 * 2**20 and paper.samples_per_case == 45
    assert paper.receiver_counts == list(range(1, 10))
    assert set(paper.congestion_controls) == {"lia", "olia", "balia", "wvegas", "cubic"}
    assert len(plan_campaign(paper, inv)) == 5 * 9 * 3 * 45


def _set(doc: dict, path: list, value) -> dict:
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return doc


INVENTORY_CASES = [
    ("unknown field", ["receivers", 0, "colour"], "blue", "receivers[0].colour", "unknown field"),
    ("wrong type", ["receivers", 0, "interfaces", "wifi", "channel", "rate_mbit"], "fast",
     "receivers[0].interfaces.wifi.channel.rate_mbit", "number"),
    ("zero receivers", ["receivers"], [], "receivers", "at least 1"),
    ("rate zero", ["receivers", 1, "interfaces", "lte", "channel", "rate_mbit"], 0,
     "receivers[1].interfaces.lte.channel.rate_mbit", "greater than 0"),
    ("rate negative", ["emulation", "wifi_ap", "capacity_mbit"], -5, "emulation.wifi_ap.capacity_mbit",
     "greater than 0"),
    ("missing radio", ["receivers", 2, "interfaces", "lte"], KeyError, "receivers[2].interfaces", "lte"),
]


@pytest.mark.parametrize("label,path,value,field,reason", INVENTORY_CASES, ids=[c[0] for c in INVENTORY_CASES])
def test_bad_inventory(tmp_path, label, path, value, field, reason):
    p = _write(tmp_path, "inv.yaml", _set(_inventory(), path, value))
    with pytest.raises(ConfigError) as ei:
        load_inventory(p)
    msg = str(ei.value)
    assert str(p) in msg and field in msg and reason in msg, msg
    assert ei.value.exit_code == 2


SCENARIO_CASES = [
    ("unknown field", ["repeats"], 3, "repeats", "unknown field"),
    ("unknown cc", ["congestion_controls"], ["cubic", "bbr2"], "congestion_controls", "unknown congestion control 'bbr2'"),
    ("unknown mode", ["modes"], ["wifi", "5g"], "modes[1]", "'wifi', 'lte' or 'both'"),
    ("wrong type", ["samples_per_case"], "many", "samples_per_case", "integer"),
    ("zero samples", ["samples_per_case"], 0, "samples_per_case", "greater than 0"),
    ("zero receivers", ["receiver_counts"], [0], "receiver_counts[0]", "greater than 0"),
    ("bad size", ["file_size"], "lots", "file_size", "not a size"),
]


@pytest.mark.parametrize("label,path,value,field,reason", SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
def test_bad_scenario(tmp_path, label, path, value, field, reason):
    p = _write(tmp_path, "sc.yaml", _set(_scenario(), path, value))
    with pytest.raises(ConfigError) as ei:
        load_scenario(p)
    msg = str(ei.value)
    assert str(p) in msg and field in msg and reason in msg, msg


def test_more_receivers_than_inventory(tmp_path):
    sc = load_scenario(_write(tmp_path, "sc.yaml", _set(_scenario(), ["receiver_counts"], [3, 12])))
    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    with pytest.raises(ConfigError, match=r"receiver_counts.*\[12\] receivers asked for"):
        plan_campaign(sc, inv, "sc.yaml")


def test_not_yaml_and_missing_file(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("receivers: [\n  - name: n1\n  bad")
    with pytest.raises(ConfigError, match=r"broken.yaml: line \d+, column \d+: not valid YAML"):
        load_inventory(p)
    with pytest.raises(ConfigError, match="file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_sizes():
    assert parse_size("60M") == 60 * 2**20
    assert parse_size("512K") == 512 * 1024
    assert parse_size("1000") == 1000
    with pytest.raises(ValueError):
        parse_size("-3M")


def _mplab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, env={**os.environ, "MPLAB_LOG": "ERROR"})


def test_cli_refuses_bad_scenario_with_exit_2_and_creates_nothing(tmp_path):
    inv = _inventory()
    inv["emulation"]["namespace_prefix"] = "mplab-cfgtest-"
    inv_path = _write(tmp_path, "inv.yaml", inv)
    sc = _set(_scenario(), ["modes"], ["wifi", "both", "satellite"])
    sc_path = _write(tmp_path, "sc.yaml", sc)
    runs = tmp_path / "runs"
    res = _mplab("run", str(sc_path), "--inventory", str(inv_path), "--runs-dir", str(runs), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "sc.yaml" in res.stderr and "modes[2]" in res.stderr
    assert not runs.exists()
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "mplab-cfgtest-" not in ns


def test_cli_refuses_bad_inventory_with_exit_2(tmp_path):
    inv = _set(_inventory(), ["receivers", 0, "interfaces", "wifi", "channel", "rate_mbit"], -1)
    inv_path = _write(tmp_path, "inv.yaml", inv)
    res = _mplab("run", str(REPO / "scenarios" / "quick.yaml"), "--inventory", str(inv_path),
                 "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 2
    assert "inv.yaml" in res.stderr and "receivers[0].interfaces.wifi.channel.rate_mbit" in res.stderr
    assert not (tmp_path / "runs").exists()


def test_cli_usage_error_exit_2(tmp_path):
    res = _mplab("run", cwd=tmp_path)
    assert res.returncode == 2 and "missing scenario" in res.stderr


def test_quick_experiment_runs_on_the_calibrated_lab():
    """`make experiment` lines up with the paper: paper-lab's N = 3 row, Table 2's BALIA and Cubic among the five;
    the physics profile stays a named alternative."""
    quick = load_scenario(REPO / "scenarios" / "quick.yaml")
    inv = load_inventory((REPO / "scenarios" / quick.inventory).resolve())
    assert inv.name == "paper-lab" and inv.emulation.power_profile.name == "paper-lab"
    assert {"balia", "cubic"} <= set(quick.congestion_controls) and quick.receiver_counts == [3]
    assert set(quick.modes) == {"wifi", "lte", "both"} and plan_campaign(quick, inv)
    physics = load_scenario(REPO / "scenarios" / "quick-physics.yaml")
    pinv = load_inventory((REPO / "scenarios" / physics.inventory).resolve())
    assert pinv.emulation.power_profile.name == "sbc-huang2012"
    assert physics.name == "quick-physics" and physics.congestion_controls == quick.congestion_controls
