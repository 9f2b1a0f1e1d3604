"""One reader of model.json (harness.modelfile) behind every loader of an exported model.

The controller (``controller.model.EnergyModel``) and the training side's reader
(``training.runtime.OnnxEnergyModel``, which the report uses) refuse the same broken folders with
the same one-line error (exit 2), and no other module parses model.json.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.modelfile import read_model_json

from conftest import REPO


def _folder(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "model.onnx").write_bytes(b"not read before model.json is")
    (d / "model.json").write_text(text)
    return d


def _loaders():
    from controller.model import EnergyModel
    from training.runtime import OnnxEnergyModel

    return [EnergyModel.load, OnnxEnergyModel.load, read_model_json]


@pytest.mark.parametrize("text,needle", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"schema_version": 99}), "schema_version 99"),
    (json.dumps({"schema_version": "1"}), "schema_version '1'"),
])
def test_every_loader_refuses_a_broken_model_json_in_one_line(tmp_path, text, needle):
    d = _folder(tmp_path, text)
    for load in _loaders():
        with pytest.raises(ConfigError, match=re.escape(needle)) as exc:
            load(d)
        assert exc.value.exit_code == 2 and "model.json" in str(exc.value) and "\n" not in str(exc.value)


def test_a_folder_without_the_files_is_not_a_model(tmp_path):
    for load in _loaders():
        with pytest.raises(ConfigError, match="not an exported model"):
            load(tmp_path)


def _names_model_json_and_parses_json(src: str) -> bool:
    """The module has the literal "model.json" and a JSON-parsing call (json.load(s), read_json)."""
    tree = ast.parse(src)
    names_it = any(isinstance(n, ast.Constant) and n.value == "model.json" for n in ast.walk(tree))
    parses = any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
                 and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) in ("load", "loads", "read_json")
                 and (not isinstance(n.func, ast.Attribute) or getattr(n.func.value, "id", "") in ("json", ""))
                 for n in ast.walk(tree))
    return names_it and parses


def test_no_other_module_parses_model_json():
    """A second reader would drift (only one handled bad JSON before): model.json is parsed in harness.modelfile."""
    readers = sorted(str(f.relative_to(REPO)) for pkg in ("harness", "controller", "training", "analysis", "mplab")
                     for f in (REPO / pkg).rglob("*.py") if _names_model_json_and_parses_json(f.read_text()))
    assert readers == ["harness/modelfile.py"], readers
    # the check itself sees a second reader
    assert _names_model_json_and_parses_json('import json\nmeta = json.loads((d / "model.json").read_text())\n')
