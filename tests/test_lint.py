"""What ruff cannot check: every suppression names its rule and gives its reason, and no library
function runs over 80 lines (small functions, each readable at once). Ruff itself runs first in `make test`
(`make lint`, configured in pyproject.toml); these tests read the source with ``tokenize`` and ``ast``.
"""
from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

from conftest import REPO

#: The installed packages (pyproject's wheel targets): the library the length rule covers.
LIBRARY = ("harness", "controller", "analysis", "training", "lte", "wifi", "mplab")
MAX_FUNCTION_LINES = 80

#: A suppression as this project writes it: the noqa marker, a colon, the codes, then " - reason".
GOOD_NOQA = re.compile(r"#\s*noqa: [A-Z]+[0-9]+(?:, [A-Z]+[0-9]+)* - \S.{3,}")
NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)


def tracked(*patterns: str) -> list[Path]:
    """The repository's tracked files matching ``patterns`` (git pathspecs)."""
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / f for f in out.stdout.split() if (REPO / f).exists()]


def bad_noqa(source: str) -> list[tuple[int, str]]:
    """(line, comment) of every ``noqa`` comment without a specific code and a reason."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and NOQA.search(tok.string) and not GOOD_NOQA.search(tok.string):
            out.append((tok.start[0], tok.string))
    return out


def long_functions(root: Path, packages: tuple[str, ...] = LIBRARY, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """``path::qualified.name`` -> lines (``def`` to its last line) of every function over ``limit``."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, rel: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno - child.lineno + 1 > limit:
                    out[f"{rel}::{name}"] = child.end_lineno - child.lineno + 1
                visit(child, rel, name + ".")
            else:
                visit(child, rel, prefix)

    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" not in f.parts:
                visit(ast.parse(f.read_text(), str(f)), f.relative_to(root).as_posix(), "")
    return out


# ---------------------------------------------------------------------------------- suppressions


def test_every_noqa_names_its_rule_and_gives_a_reason():
    bad = [f"{f.relative_to(REPO)}:{line}: {text}" for f in tracked("*.py") for line, text in bad_noqa(f.read_text())]
    assert bad == [], "write `# noqa: CODE - why this line is the exception`:\n" + "\n".join(bad)


def test_the_noqa_check_refuses_bare_and_reasonless_markers():
    src = ("import a  # noqa\n"
           "import b  # noqa: F401\n"
           "import c  # NOQA:F401 because\n"
           "import d  # noqa: F401 - re-exported for the renderers\n"
           "s = '# noqa'  # a string is not a suppression\n")
    assert [line for line, _ in bad_noqa(src)] == [1, 2, 3]


def test_ruff_refuses_a_noqa_that_suppresses_nothing():
    lint = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    # RUF100: a suppression whose rule no longer fires (or is not selected) is itself a finding.
    assert "RUF100" in lint["select"] and {"E", "F", "W", "B"} <= set(lint["select"])


# ---------------------------------------------------------------------------------- function length


def test_no_library_function_runs_over_80_lines():
    over = long_functions(REPO)
    assert over == {}, f"split these into named steps (at most {MAX_FUNCTION_LINES} lines each): {over}"


def test_the_length_check_finds_a_planted_long_function_and_names_it(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "m.py").write_text(
        "class K:\n"
        "    def short(self):\n        return 1\n\n"
        "    def long(self):\n" + "    " + body.replace("\n    ", "\n        ") + "\n"
        "def exactly_80():\n" + "".join(f"    y{i} = {i}\n" for i in range(79)))
    assert long_functions(tmp_path, ("harness",)) == {"harness/m.py::K.long": 81}
