"""The project stands alone: it cites no tracker numbers, its modules use each other's public names only,
and its benches import the installed library as a user's script would.

Read from the source (text and ``ast``); each check also runs on a planted example it must refuse.
"""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from conftest import REPO

# ---------------------------------------------------------------------------------- tracker numbers

#: "issue N", "register #N", "items N and M", or a bare "#N" where a reader would look for a ticket.
#: Users have no tracker: a comment says what the thing is (the ambiguity register's entries have names).
#: A Markdown link to a heading that starts with a number (``(#1-workspace-and-inventory)``) is no ticket.
TRACKER = re.compile(r"\b(?:issues?|tickets?|tracker|items?|register)\s+#?\d+|(?:^|[\s(\[,;])#\d+\b(?!-[a-z])",
                     re.IGNORECASE | re.MULTILINE)
#: Text that matches but is no citation: a program's own output, quoted as it is.
NOT_CITATIONS = ("Lester Gooch #5",)  # nftables 1.0.6's release name, in captured `nft -j` output
TEXT_FILES = ("*.py", "*.md", "*.yaml", "*.yml", "*.toml", "*.sh", "*.cfg", "*.txt", "*.j2", "*.html", "Makefile",
              ".ci/*")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / f for f in out.stdout.split() if (REPO / f).is_file()]


def tracker_citations(text: str) -> list[str]:
    """Every line of ``text`` that cites a tracker number."""
    for quoted in NOT_CITATIONS:
        text = text.replace(quoted, "")
    return [line.strip() for line in text.splitlines() if TRACKER.search(line)]


def test_no_file_cites_a_tracker_number():
    bad = [f"{f.relative_to(REPO)}: {line}" for f in tracked(*TEXT_FILES)
           for line in tracker_citations(f.read_text(errors="replace"))]
    assert bad == [], "say what the thing is, not its ticket:\n" + "\n".join(bad)


def test_the_tracker_check_refuses_each_form():
    n = "1" + "4"  # spelt apart, so this file does not cite one itself
    planted = [f"# fixed in issue {n}", f"(register #{n})", f"see #{n}.", f"the {'item'}s {n} and 5", f"(#{n}-{n})"]
    assert [len(tracker_citations(p)) for p in planted] == [1, 1, 1, 1, 1]
    fine = ["color:#555", "https://github.com/open5gs/open5gs/issues/902", "Linux 6.18 release_name Lester Gooch #5",
            "ambiguity `zero-loss`", "# 14 receivers", "[1. Secrets](#1-secrets)"]
    assert [tracker_citations(f) for f in fine] == [[]] * len(fine)


# ---------------------------------------------------------------------------------- private names

#: Whose private names must stay inside their module: the library and the benches (tests may open up
#: the module they test).
USERS = ("harness", "controller", "analysis", "training", "lte", "wifi", "mplab", "bench")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_definitions(tree: ast.Module) -> set[str]:
    """Private (``_x``, not dunder) functions, classes and methods a module defines."""
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.name.startswith("_") and not n.name.startswith("__")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(root: Path, packages: tuple[str, ...] = USERS) -> list[str]:
    """Every use of another of our modules' private names: imported by name, read off an imported
    module (``mod._x``), or called on one of its objects (``obj._method(...)`` where ``_method`` is
    defined in another of our modules and not in this one)."""
    files = {f: ast.parse(f.read_text(), str(f)) for pkg in packages for f in sorted((root / pkg).rglob("*.py"))
             if "__pycache__" not in f.parts}
    ours = {module_name(f, root) for f in files}
    defined = {module_name(f, root): private_definitions(t) for f, t in files.items()}
    elsewhere: dict[str, set[str]] = {}
    for mod, names in defined.items():
        for n in names:
            elsewhere.setdefault(n, set()).add(mod)
    out = []
    for f, tree in files.items():
        me, rel = module_name(f, root), f.relative_to(root).as_posix()
        modules: dict[str, str] = {}  # local name -> our module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    base = me.split(".") if f.name == "__init__.py" else me.split(".")[:-1]
                    src = ".".join(base[:len(base) - (node.level - 1)] + ([src] if src else []))
                for a in node.names:
                    if _private(a.name) and src.split(".")[0] in packages + ("tests",) and src != me:
                        out.append(f"{rel}:{node.lineno}: imports {a.name} from {src}")
                    if f"{src}.{a.name}" in ours:
                        modules[a.asname or a.name] = f"{src}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in ours and a.asname:
                        modules[a.asname] = a.name
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in modules and modules[base.id] != me:
                out.append(f"{rel}:{node.lineno}: reads {base.id}.{node.attr} ({modules[base.id]})")
            elif (not (isinstance(base, ast.Name) and base.id in ("self", "cls"))
                  and not (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super")
                  and node.attr in elsewhere and me not in elsewhere[node.attr]):
                out.append(f"{rel}:{node.lineno}: uses .{node.attr} (private to {', '.join(sorted(elsewhere[node.attr]))})")
    return sorted(out)


def test_no_module_uses_another_modules_private_names():
    assert private_uses(REPO) == [], "make the name public where it is shared, or move it to its one user"


def test_the_private_name_check_finds_each_kind_of_use(tmp_path):
    files = {
        "harness/__init__.py": "",
        "harness/store.py": "class Store:\n    def _aside(self):\n        pass\n    def keep(self):\n"
                            "        self._aside()\n\ndef _execute():\n    pass\n",
        "harness/cluster.py": "from harness import store\nfrom harness.store import _execute\n\n"
                              "def run(s):\n    store._execute()\n    s._aside()\n",
        "harness/fine.py": "import os\n\nclass A:\n    def _own(self):\n        os._exit(0)\n\n"
                           "def f(a):\n    a._own()\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert private_uses(tmp_path, ("harness",)) == [
        "harness/cluster.py:2: imports _execute from harness.store",
        "harness/cluster.py:5: reads store._execute (harness.store)",
        "harness/cluster.py:6: uses ._aside (private to harness.store)",
    ]


# ---------------------------------------------------------------------------------- benches

#: Benches that import the stand-in daemons (``tests/standins``, the LTE programs' mocks), which live with
#: the tests: they put tests/ (only) on sys.path. Every other rig is imported from ``rigs/``.
RIG_PATH_BENCHES = {"lte_deploy.py"}
#: ``--code DIR`` measures another checkout's code: that checkout goes first on sys.path, on purpose.
CODE_PATH_BENCHES = {"controller_bench.py"}


def sys_path_edits(tree: ast.Module) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("insert", "append") and ast.unparse(n.func.value) == "sys.path"]


def test_benches_import_the_library_as_users_do():
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
    for f in sorted((REPO / "bench").glob("*.py")):
        assert f.stem not in packages, f"bench/{f.name} shadows the {f.stem} package for every bench beside it"
        edits = sys_path_edits(ast.parse(f.read_text()))
        if f.name in RIG_PATH_BENCHES:
            assert edits and all("'tests'" in ast.unparse(e) for e in edits), f"bench/{f.name}: tests/ only"
        elif f.name not in CODE_PATH_BENCHES:
            assert edits == [], f"bench/{f.name} edits sys.path: `uv run` already imports the installed library"
        text = f.read_text()
        assert "from tests" not in text and "import tests" not in text, f"bench/{f.name} imports the tests package"
    assert sys_path_edits(ast.parse("import sys\nsys.path.insert(0, str(REPO))\n"))  # the check sees one
