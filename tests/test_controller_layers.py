"""The controller's place in the layers: it imports harness (and itself) only; harness never imports it."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def imported_tops(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            tops.add(node.module.split(".")[0])
    return tops


def test_controller_imports_harness_only_and_harness_never_imports_controller():
    for f in sorted((REPO / "controller").rglob("*.py")):
        bad = imported_tops(f) & {"training", "analysis", "mplab", "lte", "wifi"}
        assert not bad, f"{f.relative_to(REPO)} imports {sorted(bad)} (controller may import harness only)"
    for f in sorted((REPO / "harness").rglob("*.py")):
        assert "controller" not in imported_tops(f), f"{f.relative_to(REPO)} imports controller"
