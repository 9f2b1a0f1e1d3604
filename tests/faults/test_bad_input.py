"""Bad inventories and scenarios exit 2 naming the file and the reason, never with a traceback (issue 14: 4, 11, 12)."""
from __future__ import annotations

import shutil

import pytest
import yaml

from harness.config.load import load_yaml_model
from harness.errors import ConfigError
from harness.config.inventory import Inventory, load_inventory
from harness.config.scenario import Scenario

from .conftest import REPO, mplab


def _bad_files(tmp_path):
    """(kind, path, what the message must say) for each kind of bad input."""
    good = (REPO / "inventory" / "emulated.yaml").read_bytes()
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(good.replace(b"name: emulated-9", "name: émulé".encode("latin-1")))
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:  # sparse: big on paper, cheap on disk
        f.truncate(50 * 1024 * 1024)
    return [("non-UTF-8", latin1, "not UTF-8"), ("5000-deep nesting", deep, "nested too deeply"),
            ("50 MB", huge, "larger than")]


def test_bad_config_files_are_config_errors(tmp_path):
    for kind, path, says in _bad_files(tmp_path):
        with pytest.raises(ConfigError, match=says) as info:
            load_inventory(path)
        assert str(path) in str(info.value), kind
        assert info.value.exit_code == 2


@pytest.mark.parametrize("role", ["scenario", "inventory"])
def test_cli_refuses_bad_files_with_exit_2_and_no_traceback(tmp_path, role):
    scenario = tmp_path / "quick.yaml"
    shutil.copy(REPO / "scenarios" / "quick.yaml", scenario)
    for kind, path, says in _bad_files(tmp_path):
        if role == "scenario":
            res = mplab("run", str(path), "--dry-run")
        else:
            res = mplab("run", str(scenario), "--inventory", str(path), "--dry-run")
        assert res.returncode == 2, (kind, res.stderr[-2000:])
        assert "Traceback" not in res.stderr and says in res.stderr and str(path) in res.stderr, kind


def test_size_limit_reads_no_more_than_the_limit(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("a: 1\n" + "#" * (2 * 1024 * 1024))
    with pytest.raises(ConfigError, match="larger than"):
        load_yaml_model(Scenario, p)


def test_zero_base_power_is_valid():
    """A meter on the radios only reads 0 W at idle (issue 14 item 12)."""
    doc = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    doc["emulation"]["power_profile"]["base_w"] = 0
    inv = Inventory.model_validate(doc)
    assert inv.emulation.power_profile.base_w == 0
    doc["emulation"]["power_profile"]["base_w"] = -0.1
    with pytest.raises(ValueError):
        Inventory.model_validate(doc)


def test_scenario_inventory_is_resolved_from_the_scenario_folder(tmp_path):
    """`inventory:` in a scenario is relative to the scenario's folder, not to the current directory (item 11)."""
    (tmp_path / "scn").mkdir()
    (tmp_path / "inv").mkdir()
    shutil.copy(REPO / "inventory" / "emulated.yaml", tmp_path / "inv" / "lab9.yaml")
    doc = yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())
    doc["inventory"] = "../inv/lab9.yaml"
    (tmp_path / "scn" / "s.yaml").write_text(yaml.safe_dump(doc))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = mplab("run", str(tmp_path / "scn" / "s.yaml"), "--dry-run", cwd=elsewhere)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "emulated-9" in res.stdout
    # The repository's own scenarios work from any directory.
    res = mplab("run", str(REPO / "scenarios" / "quick.yaml"), "--dry-run", cwd=elsewhere)
    assert res.returncode == 0, res.stderr[-2000:]
