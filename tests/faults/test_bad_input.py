"""Bad inventories and scenarios exit 2 naming the file and the reason, never with a traceback."""
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
    """A meter on the radios only reads 0 W at idle: a zero base power is valid."""
    doc = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    doc["emulation"]["power_profile"]["base_w"] = 0
    inv = Inventory.model_validate(doc)
    assert inv.emulation.power_profile.base_w == 0
    doc["emulation"]["power_profile"]["base_w"] = -0.1
    with pytest.raises(ValueError):
        Inventory.model_validate(doc)


def test_scenario_inventory_is_resolved_from_the_scenario_folder(tmp_path):
    """`inventory:` in a scenario is relative to the scenario's folder, not to the current directory."""
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


def _scenario_text(tmp_path, body: str) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(f"inventory: {REPO / 'inventory' / 'emulated.yaml'}\n" + body)
    return str(p)


QUICK = "name: q\ncongestion_controls: [cubic]\nreceiver_counts: [1]\nmodes: [wifi]\nfile_size: 1M\n"


@pytest.mark.parametrize("line, says", [
    ("samples_per_case: true", "true/false is not a number"),
    ("samples_per_case: 10000000", "less than or equal to 100000"),
    ("samples_per_case: 3\ntransfer_timeout_s: .inf", "finite number"),
    ("samples_per_case: 3\ntransfer_timeout_s: .nan", "finite number"),
    ("samples_per_case: 3\nsettle_s: 1e300", "less than or equal to 3600"),
    ("samples_per_case: 3\nseed: -1", "greater than or equal to 0"),
    ("samples_per_case: 3\nfile_size: 200G", "more than 100 GiB"),
    ("samples_per_case: 3\nfile_size: '" + "9" * 400 + "'", "out of range"),
    ("samples_per_case: 3\nreceiver_counts: [true]", "true/false is not a number"),
])
def test_strict_numbers_and_physical_bounds_are_refused_fast(tmp_path, line, says):
    """No bool for a number, finite floats, bounds the schema states (a sample count of 10^7 is refused at
    once, never planned: the process would otherwise grow by gigabytes)."""
    doc = {**yaml.safe_load(QUICK), **yaml.safe_load(line)}
    path = _scenario_text(tmp_path, yaml.safe_dump(doc))
    res = mplab("run", path, "--dry-run", timeout=60)
    assert res.returncode == 2, res.stderr[-2000:]
    assert says in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert path in res.stderr


def test_a_plan_too_big_for_memory_is_refused_before_it_is_built(tmp_path):
    body = ("name: q\ncongestion_controls: [cubic, reno, lia, olia, balia, wvegas]\nreceiver_counts: [1, 2, 3, 4, 5]\n"
            "modes: [wifi, lte, both]\nfile_size: 1M\nsamples_per_case: 100000\n")
    res = mplab("run", _scenario_text(tmp_path, body), "--dry-run", timeout=60)
    assert res.returncode == 2 and "9,000,000 samples" in res.stderr and "split the sweep" in res.stderr, res.stderr


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    path = _scenario_text(tmp_path, QUICK + "samples_per_case: 3\nsamples_per_case: 5\n")
    res = mplab("run", path, "--dry-run")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "'samples_per_case' given twice (lines 7 and 8)" in res.stderr, res.stderr


def test_every_error_is_printed_with_its_line_and_a_did_you_mean(tmp_path):
    """A misspelled key no longer hides behind "Field required; and 1 more error(s)"."""
    body = QUICK.replace("modes: [wifi]", "modes: [5g]") + "sample_per_case: 3\nsettle_s: -1\n"
    path = _scenario_text(tmp_path, body)
    res = mplab("run", path, "--dry-run")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    err = res.stderr
    assert "4 error(s)" in err, err
    assert f"{path}:7: sample_per_case: unknown field" in err and "did you mean 'samples_per_case'?" in err, err
    assert f"{path}:5: modes[0]:" in err and f"{path}:8: settle_s:" in err, err
    assert "samples_per_case: Field required" in err


@pytest.mark.parametrize("args", [["--testbeds", "0"], ["--testbeds", "-1"], ["--testbeds", "65"],
                                  ["--shard-size", "0"]])
def test_counts_on_the_command_line_are_bounded(args):
    res = mplab("run", str(REPO / "scenarios" / "quick.yaml"), "--dry-run", *args)
    assert res.returncode == 2 and "Invalid value" in res.stderr and "Traceback" not in res.stderr, res.stderr


def _alias_bomb(levels: int = 9) -> str:
    """"Billion laughs": nine lists of nine aliases of the previous list, 9^levels values once expanded."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("role", ["scenario", "inventory"])
def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path, role):
    """Before: 9^9 values walked by the line map and the validator (5.4-5.9 GB, no output); now one line."""
    bomb = tmp_path / "bomb.yaml"
    if role == "scenario":
        bomb.write_text(f"inventory: {REPO / 'inventory' / 'emulated.yaml'}\n{QUICK}" + _alias_bomb()
                        + "congestion_controls2: *a8\n")
        args = ["run", str(bomb), "--dry-run"]
    else:
        bomb.write_text((REPO / "inventory" / "emulated.yaml").read_text() + _alias_bomb())
        args = ["run", str(REPO / "scenarios" / "quick.yaml"), "--inventory", str(bomb), "--dry-run"]
    res = mplab(*args, "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path, timeout=60)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and "aliases" in res.stderr and str(bomb) in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yaml"]


@pytest.mark.parametrize("text, says", [
    ("a: &a [*a]\n", "contains itself"),
    ("a: &a {b: *a}\n", "contains itself"),
    ("name: '" + "x" * 70_000 + "'\n", "line 1 is 70,008 characters long"),
])
def test_self_referring_aliases_and_endless_lines_are_config_errors(text, says):
    from harness.config.load import parse_yaml_lines

    with pytest.raises(ConfigError, match=says):
        parse_yaml_lines(text, "s.yaml")


def test_aliases_within_the_bound_still_load():
    from harness.config.load import parse_yaml_lines

    data, lines = parse_yaml_lines("a: &a [1, 2]\nb: *a\n", "s.yaml")
    assert data == {"a": [1, 2], "b": [1, 2]} and lines[("b",)] == 2
