"""The fresh-machine guard: every program mplab calls comes from a package `make setup` installs.

Three checks, none needs root: the Makefile's apt list covers ``harness.tools.TOOLS``; every
program name found in an argv the code builds is in that table; and, where a program is
installed here, ``dpkg -S`` agrees with the table about its package. A tool installed by hand on
a developer's machine can then never hide a missing install step again (it did: mptcpize).
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.tools import TOOLS, local_packages, missing_from

REPO = Path(__file__).resolve().parent.parent
#: Where the code builds argv lists: the library, the CLI, the benches, the test rigs (rigs/) and the tests.
SOURCES = ("harness", "lte", "wifi", "training", "controller", "mplab", "bench", "rigs", "tests")
#: Names in argv lists of tests that are deliberately not programs, or are the test's own subject.
NOT_PROGRAMS = {
    "definitely-not-a-program-xyz": "tests that a missing program is reported",
    "no-such-program-mplab": "tests that a missing program is reported over SSH",
    "no-such-thing-xyz": "tests Host.which on a missing program",
    "false": "tests a failing command (coreutils, always present)",
    "make": "the Makefile itself: README's first step installs make with git and python3",
    "uv": "builds and installs the wheel (rigs/wheel.py): make setup brings it (PYTHON_TOOLS)",
    "mplab": "mplab itself, installed from its wheel (bench/install.py)",
    "init": "the argv of mplab.cli.run (`mplab init`), not a program",
}
_PROG = re.compile(r"^[a-z][a-z0-9_.+-]*$")
_RUNNERS = {"run", "start", "Popen", "check_output", "check_call", "call", "wrap"}


def apt_packages() -> set[str]:
    """The packages ``make setup`` installs, as the Makefile says (``make apt-packages``)."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "apt-packages"], cwd=REPO, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return set(out.split())


def _first_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.BinOp):
        return _first_str(node.left)
    if isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Constant) \
            and isinstance(node.elts[0].value, str):
        return node.elts[0].value
    return None


def programs_in(source: str) -> list[tuple[str, int]]:
    """(program, line) for every argv list built in ``source``: returned by an ``*_argv`` function, passed
    to run/start/Popen, assigned to an ``argv``/``cmd`` name, or looked up with ``which``."""
    found: list[tuple[str | None, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_argv"):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    found += [(_first_str(m), ret.lineno) for m in ast.walk(ret.value)]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _RUNNERS and node.args:
                found.append((_first_str(node.args[0]), node.lineno))
            if name == "which" and node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.args[0].value, node.lineno))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and re.search("argv|cmd", t.id)
                                                  for t in node.targets):
            found.append((_first_str(node.value), node.lineno))
    return [(p, line) for p, line in found if isinstance(p, str) and _PROG.match(p)]


def test_make_setup_installs_the_package_of_every_local_tool():
    apt = apt_packages()
    missing = missing_from(apt)
    assert not missing, "make setup does not install: " + ", ".join(f"{t.program} ({t.package})" for t in missing)
    assert "mptcpize" in apt  # the one that broke a fresh machine: mptcpd only recommends it


def test_the_guard_names_a_tool_whose_package_leaves_the_list():
    apt = apt_packages() - {"mptcpize"}
    assert [t.program for t in missing_from(apt)] == ["mptcpize"]
    assert [t.program for t in missing_from(apt - {"iproute2"})] == ["mptcpize", "ip", "tc", "ss", "nstat"]


def test_every_program_the_code_calls_is_in_the_table():
    unknown: dict[str, list[str]] = {}
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*.py")):
            for prog, line in programs_in(path.read_text()):
                if prog not in TOOLS and prog not in NOT_PROGRAMS:
                    unknown.setdefault(prog, []).append(f"{path.relative_to(REPO)}:{line}")
    assert not unknown, f"programs called but missing from harness/tools.py TOOLS: {unknown}"


def test_the_argv_reader_finds_programs_in_every_form_the_code_uses():
    src = '''
def veth_argv(a):
    return ["ip", "link", "add", a]
def f(host, x):
    host.run(["nft", "list", "ruleset"])
    argv = ["ethtool", "-K", x] + ["tx", "off"]
    if host.which("hostapd"):
        subprocess.Popen(["wpa_supplicant", "-c", x])
    values = ["cubic", "lia"]  # not an argv
'''
    assert sorted(p for p, _ in programs_in(src)) == ["ethtool", "hostapd", "ip", "nft", "wpa_supplicant"]


def _dpkg_owner(path: str) -> str | None:
    # Debian 12 merged /usr: dpkg knows /bin/ip while PATH finds /usr/sbin/ip, so try each spelling.
    name = os.path.basename(path)
    for cand in dict.fromkeys([path, *(f"{d}/{name}" for d in ("/bin", "/sbin", "/usr/bin", "/usr/sbin"))]):
        res = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True, timeout=30)
        owners = [ln.split(":", 1)[0].strip() for ln in res.stdout.splitlines()
                  if ln and not ln.startswith("diversion ")]  # /bin/sh: "diversion by dash from: /bin/sh"
        if res.returncode == 0 and owners:
            return owners[0]
    return None


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="not a Debian system: dpkg -S cannot cross-check")
def test_the_table_agrees_with_dpkg_where_a_tool_is_installed():
    checked, wrong = 0, {}
    for tool in TOOLS.values():
        path = shutil.which(tool.program) or shutil.which(tool.program, path="/usr/sbin:/sbin")
        if path is None:
            continue
        owner = _dpkg_owner(path)
        if owner is None:  # not from a Debian package here (e.g. a hand-built srsenb): nothing to compare
            continue
        checked += 1
        if owner != tool.package:
            wrong[tool.program] = (tool.package, owner)
    assert not wrong, f"harness/tools.py says (table, dpkg): {wrong}"
    assert checked >= len(local_packages())  # the local tools are installed where this runs (make setup)
