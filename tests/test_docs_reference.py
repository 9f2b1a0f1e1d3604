"""The guide's reference pages are the code's: regenerated from the CLI, the pydantic models and
harness.errors (docs/gen_reference.py), they must equal the committed pages, and the comparison must
catch a page that differs.
"""
from __future__ import annotations

import importlib.util
import json

from conftest import REPO


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reference_pages_match_the_code():
    gen = _generator()
    stale = [str(p.relative_to(REPO)) for p in gen.stale(gen.pages())]
    assert stale == [], f"reference pages differ from the code: run `uv run --frozen python docs/gen_reference.py` " \
                        f"and commit them: {stale}"


def test_every_command_and_field_is_on_a_page():
    """The pages hold what the code declares: every leaf command, every scenario and record field."""
    import typer.main

    from harness.campaign.records import SampleRecord
    from harness.config.scenario import Scenario
    from mplab.cli import app

    pages = _generator().pages()
    gen_dir = REPO / "docs" / "reference"
    cli = pages[gen_dir / "cli.md"]
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        for sub in getattr(cmd, "commands", {}) or {None: cmd}:
            assert f"`mplab {name}{' ' + sub if sub else ''}`" in cli
    for model, page in ((Scenario, "scenario.md"), (SampleRecord, "record.md")):
        for field in model.model_fields:
            assert f"| `{field}` |" in pages[gen_dir / page], (page, field)
    schema = json.loads(pages[gen_dir / "schemas" / "scenario.schema.json"])
    assert set(schema["properties"]) == set(Scenario.model_fields)


def test_the_drift_check_catches_a_changed_page(tmp_path):
    gen = _generator()
    pages = gen.pages()
    page = gen.OUT / "cli.md"
    planted = {tmp_path / "cli.md": pages[page], tmp_path / "scenario.md": pages[gen.OUT / "scenario.md"]}
    for p, text in planted.items():
        p.write_text(text)
    assert gen.stale(planted) == []
    (tmp_path / "cli.md").write_text(pages[page].replace("`mplab run`", "`mplab run-old`", 1))
    (tmp_path / "scenario.md").unlink()
    assert sorted(p.name for p in gen.stale(planted)) == ["cli.md", "scenario.md"]
