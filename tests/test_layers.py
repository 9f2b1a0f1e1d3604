"""The layer directions of docs/architecture.md, and no import cycles, read from the source with ``ast``.

Every import counts: at the top, inside functions (lazy), under ``TYPE_CHECKING``. A module
that imports a package's submodule (``from harness.cc import bpfcc``) depends on that
submodule; one that imports a name from a package depends on the package's ``__init__``.
The implicit import of a module's own parent packages is not an edge (Python runs a
package's ``__init__`` before its submodules, so it would make every ``__init__`` that
imports a submodule a "cycle").

Rules (``RULES``), as docs/architecture.md writes them (``doc_rules`` reads that paragraph and a
test checks ``RULES`` against it): ``harness`` knows nothing above it; ``lte`` and ``wifi`` import
``harness`` only, never each other; ``training`` reads datasets (no lte, wifi, controller,
analysis, mplab); ``controller`` imports ``harness`` only (never ``training``: it reads exported
models); ``analysis`` never imports ``mplab`` or ``controller``; nothing imports ``mplab`` (the
command line); no library package imports the test and bench rigs (``rigs``, outside the wheel).

Packages too form no cycle (``package_graph``): every sub-package (``harness/campaign/``,
``controller/steering/``) is one node with all its modules, a loose module of a top-level package
(``harness/errors.py``) is a node of its own. So ``harness.campaign`` may use ``harness.cc``, or the
other way round, never both, even when no single module closes the loop.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from conftest import REPO

#: Top-level package -> top-level packages it must never import.
RULES: dict[str, set[str]] = {
    "harness": {"lte", "wifi", "training", "controller", "analysis", "mplab"},
    "lte": {"wifi", "training", "controller", "analysis", "mplab"},
    "wifi": {"lte", "training", "controller", "analysis", "mplab"},
    "training": {"lte", "wifi", "controller", "analysis", "mplab"},
    "controller": {"lte", "wifi", "training", "analysis", "mplab"},
    "analysis": {"controller", "mplab"},
}
#: The top-level packages the rules speak of.
TOPS = {"harness", "lte", "wifi", "training", "controller", "analysis", "mplab"}
#: Test and bench rigs: only tests, benches and the rigs themselves import them.
RIGS = "rigs"
NOT_PACKAGES = {"tests", "bench"}
#: The installed library: the wheel's packages less the command line (pyproject.toml).
LIBRARY = ("harness", "lte", "wifi", "training", "controller", "analysis")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every package at the top of ``root``."""
    out = {}
    for pkg in sorted(p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if pkg.name in NOT_PACKAGES:
            continue
        for f in pkg.rglob("*.py"):
            if "__pycache__" in f.parts:
                continue
            parts = f.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = f
    return out


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Our modules that ``name`` imports, anywhere in its source."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            # ``from pkg import sub`` depends on the submodule; ``from pkg import name`` on pkg.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        for t in targets:
            dep = _known(t, mods)
            if dep and dep != name:
                out.add(dep)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> our modules it imports."""
    mods = modules(root)
    return {m: imports_of(m, f, mods) for m, f in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes against ``RULES``, the CLI rule or the rigs rule, as readable lines."""
    out = []
    for a, deps in sorted(graph.items()):
        top_a = a.split(".")[0]
        for b in sorted(deps):
            top_b = b.split(".")[0]
            if top_b in RULES.get(top_a, set()):
                out.append(f"{a} imports {b} ({top_a} never imports {top_b})")
            elif top_b == "mplab" and top_a != "mplab":
                out.append(f"{a} imports {b} (nothing imports the command line)")
            if top_b == RIGS and top_a != RIGS:
                out.append(f"{a} imports {b} (the library never imports test and bench rigs)")
    return out


def package_of(module: str, path: Path, root: Path) -> str:
    """The node ``module`` belongs to in the package graph: its sub-package (the first two names)
    when it lives in one, else the module itself (a loose module of a top-level package)."""
    in_subpackage = len(path.relative_to(root).parts) > 2  # top/sub/module.py, top/sub/__init__.py, deeper
    return ".".join(module.split(".")[:2]) if in_subpackage else module


def package_graph(root: Path) -> dict[str, set[str]]:
    """node -> nodes it imports (``package_of``), from the module graph; a node's own imports are dropped."""
    mods = modules(root)
    node = {m: package_of(m, f, root) for m, f in mods.items()}
    out: dict[str, set[str]] = {}
    for a, deps in import_graph(root).items():
        out.setdefault(node[a], set()).update(node[b] for b in deps if node[b] != node[a])
    return out


# ---------------------------------------------------------------------------------- the tree


def test_the_tree_has_no_import_cycles():
    graph = import_graph(REPO)
    assert len(graph) > 50, f"the checker read only {len(graph)} modules: is REPO right?"
    assert cycles(graph) == []


def test_the_tree_keeps_the_layer_directions():
    assert layer_breaks(import_graph(REPO)) == []


def doc_rules(text: str) -> dict[str, set[str]]:
    """The import directions the architecture page states, as ``RULES`` spells them.

    Reads the paragraph that starts "Import directions": each clause "`a` [and `b`] never imports
    `x`, `y` or `z`" forbids those; "`a` [and `b`] import(s) `harness` only" forbids every other package.
    """
    para = text[text.index("Import directions"):]
    para = " ".join(para.split("\n\n")[0].split())
    rules: dict[str, set[str]] = {}
    for clause in para.split(";"):
        m = re.search(r"((?:`\w+`(?: and |, )?)+) (never imports|imports? `harness` only)(.*)", clause)
        if not m:
            continue
        subjects = re.findall(r"`(\w+)`", m[1])
        for s in subjects:
            if m[2] == "never imports":
                rules.setdefault(s, set()).update(re.findall(r"`(\w+)`", m[3].split("(")[0]))
            else:
                rules.setdefault(s, set()).update(TOPS - {s, "harness"})
    return rules


def test_the_rules_are_the_ones_the_architecture_page_states():
    doc = doc_rules((REPO / "docs" / "architecture.md").read_text())
    assert set(doc) == set(RULES), "a package the page gives rules for has none here, or the other way round"
    for pkg, forbidden in doc.items():
        assert RULES[pkg] >= forbidden, f"docs/architecture.md says {pkg} never imports {sorted(forbidden - RULES[pkg])}"
    assert doc["controller"] >= {"training"} and doc["lte"] >= {"wifi"} and doc["wifi"] >= {"lte"}


def test_the_page_reader_reads_each_form_of_rule():
    text = ("Import directions, enforced by tests: `harness` never imports `lte`, `wifi` or `mplab`; `lte` and "
            "`wifi`\nimport `harness` only; `controller` imports `harness` only (never `training`: models);\n"
            "`analysis` never imports `mplab` or `controller`; nothing imports `mplab`.\n\nNext paragraph: "
            "`training` never imports `harness`.")
    rules = doc_rules(text)
    assert rules["harness"] == {"lte", "wifi", "mplab"}
    assert rules["lte"] == TOPS - {"lte", "harness"} and rules["wifi"] == TOPS - {"wifi", "harness"}
    assert rules["controller"] == TOPS - {"controller", "harness"} and rules["analysis"] == {"mplab", "controller"}
    assert "training" not in rules  # another paragraph


def test_the_library_packages_form_no_cycle():
    graph = package_graph(REPO)
    assert {"harness.campaign", "harness.testbeds", "harness.errors", "controller.steering"} <= set(graph)
    assert cycles(graph) == []


#: Packages whose docstring is a map of their modules (one line each, the name first).
MAPPED = ("harness", "harness/campaign", "harness/testbeds", "harness/emulation", "harness/upkeep", "harness/dataset",
          "harness/watch", "training", "mplab/commands")


def _map_names(pkg: Path) -> list[str]:
    """The names a package's docstring lists, in order: the first word of each indented line."""
    doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text()), clean=False) or ""
    return [w.rstrip("/").removesuffix(".py") for line in doc.splitlines() if line.startswith("    ")
            for w in line.split()[:1]]


def test_the_package_maps_name_every_module():
    for rel in MAPPED:
        pkg = REPO / rel
        have = {f.stem for f in pkg.glob("*.py") if f.stem != "__init__"}
        have |= {d.name for d in pkg.iterdir() if (d / "__init__.py").exists()}
        named = set()
        for line in (ast.get_docstring(ast.parse((pkg / "__init__.py").read_text()), clean=False) or "").splitlines():
            if line.startswith("    "):
                named |= {w.rstrip("/").removesuffix(".py") for w in line.split()}
        assert have - named == set(), f"{rel}/__init__.py does not list {sorted(have - named)}"


def test_harness_lists_its_sub_packages_lowest_first():
    order = [n for n in _map_names(REPO / "harness") if (REPO / "harness" / n / "__init__.py").exists()]
    graph = package_graph(REPO)
    for i, name in enumerate(order):
        above = {f"harness.{n}" for n in order[i + 1:]}
        assert graph[f"harness.{name}"] & above == set(), f"harness.{name} imports a package listed after it"


def test_the_library_has_no_command_modules_and_ships_no_rigs():
    # Every command lives in mplab/commands/; the rigs stay out of the wheel's packages.
    clis = sorted(str(f.relative_to(REPO)) for top in LIBRARY for f in (REPO / top).rglob("cli.py"))
    assert clis == []
    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert set(wheel["packages"]) == {*LIBRARY, "mplab"} and RIGS not in wheel["packages"]


# ------------------------------------------------------------- the checker on planted trees


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


CLEAN = {
    "harness/__init__.py": "",
    "harness/errors.py": "",
    "harness/cc/__init__.py": "from harness.cc import bpfcc\nfrom harness.errors import X\n",
    "harness/cc/bpfcc.py": "from harness.errors import X\n",
    "rigs/__init__.py": "",
    "rigs/rig.py": "from harness.cc import bpfcc\n",
    "lte/__init__.py": "",
    "lte/deploy.py": "from harness.cc import bpfcc\n",
    "mplab/__init__.py": "",
    "mplab/cli.py": "import lte.deploy\nfrom harness.cc import resolve\n",
}


def test_a_clean_planted_tree_passes(tmp_path):
    graph = import_graph(_tree(tmp_path, CLEAN))
    # A package __init__ importing its own submodule is no cycle; ``from pkg import sub`` is an edge to sub.
    assert graph["harness.cc"] == {"harness.cc.bpfcc", "harness.errors"}
    assert graph["lte.deploy"] == {"harness.cc.bpfcc"}
    assert graph["mplab.cli"] == {"lte.deploy", "harness.cc"}
    assert cycles(graph) == [] and layer_breaks(graph) == []


def test_a_planted_cycle_is_found_even_through_a_lazy_import(tmp_path):
    files = {**CLEAN,
             "harness/a.py": "from harness.b import f\n",
             "harness/b.py": "def g():\n    from harness.c import h\n    return h\n",
             "harness/c.py": "if False:\n    import harness.a\n"}
    assert cycles(import_graph(_tree(tmp_path, files))) == [["harness.a", "harness.b", "harness.c"]]


def test_a_planted_cycle_through_a_package_init_is_found(tmp_path):
    # bpfcc needs a *name* from harness/cc/__init__.py, which imports bpfcc: a real cycle.
    files = {**CLEAN, "harness/cc/bpfcc.py": "from harness.cc import ALGORITHMS\n"}
    assert cycles(import_graph(_tree(tmp_path, files))) == [["harness.cc", "harness.cc.bpfcc"]]


def test_a_planted_package_cycle_is_found_though_no_module_cycle_is(tmp_path):
    # campaign.store -> cc (a module of cc), cc.bpfcc -> campaign.meta: no module imports itself back,
    # but the packages campaign and cc depend on each other.
    files = {**CLEAN,
             "harness/campaign/__init__.py": "",
             "harness/campaign/store.py": "from harness.cc import bpfcc\n",
             "harness/campaign/meta.py": "from harness.errors import X\n",
             "harness/cc/bpfcc.py": "from harness.campaign.meta import flavour\n"}
    root = _tree(tmp_path, files)
    assert cycles(import_graph(root)) == []
    assert cycles(package_graph(root)) == [["harness.campaign", "harness.cc"]]
    # A loose module of a top-level package is its own node: harness.errors <- cc and campaign is no cycle.
    assert package_graph(root)["harness.errors"] == set()


def test_planted_layer_breaks_are_each_named(tmp_path):
    files = {**CLEAN,
             "wifi/__init__.py": "",
             "wifi/render.py": "from lte.deploy import push\n",                  # wifi -> lte
             "harness/cc/cli.py": "def main():\n    import training.fit\n",         # harness -> training, lazily
             "harness/campaign.py": "from rigs.rig import Rig\n",                   # library -> rig
             "lte/cli.py": "from mplab import cli\n",                              # anything -> mplab
             "training/__init__.py": "",
             "training/fit.py": "import wifi.render\n"}                            # training -> wifi
    breaks = layer_breaks(import_graph(_tree(tmp_path, files)))
    assert breaks == [
        "harness.campaign imports rigs.rig (the library never imports test and bench rigs)",
        "harness.cc.cli imports training.fit (harness never imports training)",
        "lte.cli imports mplab.cli (lte never imports mplab)",
        "training.fit imports wifi.render (training never imports wifi)",
        "wifi.render imports lte.deploy (wifi never imports lte)",
    ]


#: A module named in a string: a registry's lazy ``"pkg.mod:Class"`` or a ``python -m pkg.mod`` argument.
NAMED = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+)(?::[A-Za-z_]\w*)?$")


def named_modules(root: Path) -> dict[str, set[str]]:
    """module -> our modules it names in a string constant (loaded by name, not by an import statement)."""
    mods = modules(root)
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := NAMED.match(node.value)):
                if m.group(1) in mods and m.group(1) != name:
                    out.setdefault(name, set()).add(m.group(1))
    return out


def product_modules(graph: dict[str, set[str]]) -> set[str]:
    """Every module the command line reaches through imports (with the packages that hold them)."""
    seen: set[str] = set()
    todo = [m for m in graph if m == "mplab" or m.startswith("mplab.")]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # a module's packages run first
        todo.extend(graph.get(m, ()))
    return seen


def test_the_wheel_holds_the_product_only():
    # A library module that no command reaches is code only benches and tests use: it belongs in rigs/.
    graph = import_graph(REPO)
    for mod, named in named_modules(REPO).items():
        graph[mod] = graph[mod] | named
    library = {m for m in graph if m.split(".")[0] in LIBRARY}
    assert sorted(library - product_modules(graph)) == []


def test_research_code_outside_the_product_is_found(tmp_path):
    files = {**CLEAN, "harness/cc/oracle.py": "from harness.errors import X\n"}
    graph = import_graph(_tree(tmp_path, files))
    assert "harness.cc.oracle" not in product_modules(graph)
    assert {"harness.cc", "harness.cc.bpfcc", "harness", "lte.deploy", "harness.errors"} <= product_modules(graph)
