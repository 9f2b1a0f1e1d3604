"""The guide speaks to its users: README and docs/ link only to what exists, cite only files the repository
has, do not narrate how the work was done, and build as a site with nothing missing from it.

Each check is a function over text, run on every page and on a planted bad example it must refuse. The
site build (``mkdocs build --strict``) fails on a broken link or a page left out of the navigation
(mkdocs.yml's ``validation``). The reference pages' drift is tests/test_docs_reference.py's.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

#: The front page's length: what mplab is, how to start, where to read on.
README_MAX_LINES = 250

#: Phrases that tell how the work was done instead of what the reader gets. A dated research report says
#: when it was measured by its date, not by "this session".
#: ("session" alone is mplab's word for one run or resume of a campaign.)
NARRATION = ("this session", "session found", "session measured", "we tried", "we decided", "house " + "rule",
             "this branch", "reached main", "the lead engineer")

#: Files and folders users do not have: developer notes outside the repository. Spelt in pieces, so that this
#: file does not cite them itself.
GHOSTS = ("STYLE" + ".md", "DESIGN" + ".md", "/".join(("", "shared", "")), "/".join(("work", "shared")))

#: The repository's own top-level folders: a backticked or linked path that starts with one must exist.
REPO_DIRS = ("harness", "mplab", "lte", "wifi", "training", "controller", "analysis", "rigs", "bench", "tests",
             "docs", "scenarios", "inventory")

#: Paths a checkout only has once built (`make bpf`, `make docs`): cited on purpose.
BUILT = ("harness/cc/bpf/build", "site")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"`([^`\n]+)`")


def pages() -> list[Path]:
    """README and every Markdown page of the guide that git tracks or that is new in the tree."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "README.md",
                          "docs"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return sorted(REPO / f for f in set(out) if f.endswith(".md") and (REPO / f).is_file())


def _prose(text: str) -> str:
    """The text without fenced code blocks (a command's output may say anything)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def broken_links(text: str, page: Path, root: Path = REPO) -> list[str]:
    """Relative links in ``text`` (on ``page``) whose target does not exist."""
    bad = []
    for target in LINK.findall(_prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, mailto:, or an anchor on the same page
        path = target.split("#")[0]
        if path and not (page.parent / path).exists():
            bad.append(target)
        elif path and not (page.parent / path).resolve().is_relative_to(root.resolve()):
            bad.append(target + " (outside the repository)")
    return bad


def cited_paths(text: str) -> list[str]:
    """Repository paths ``text`` names in backticks or links (placeholders such as `runs/<id>/` left out)."""
    out = []
    # A backticked path alone is a citation; a command in backticks (`ssh-keygen -lf inventory/x`) names the
    # user's files, not the repository's.
    tokens = [t for t in CODE.findall(_prose(text)) if not t.strip().count(" ")] + LINK.findall(_prose(text))
    for word in tokens:
        word = word.strip().split("::")[0].split("#")[0].rstrip(".,;:)").lstrip("(")
        word = re.sub(r"^(\.\./)+", "", word)
        if word.split("/")[0] in REPO_DIRS and "/" in word and not re.search(r"[<>*${}\[\]|=?]", word):
            out.append(word)
    return out


def ghost_citations(text: str, page: Path, root: Path = REPO) -> list[str]:
    """Files ``text`` cites that the repository does not have, and notes users never see."""
    bad = [g for g in GHOSTS if g in text]
    for word in cited_paths(text):
        if word.startswith(BUILT):
            continue
        if not (root / word).exists() and not (page.parent / word).exists():
            bad.append(word)
    return bad


def narration(text: str) -> list[str]:
    """Lines of ``text`` that tell how the work was done."""
    return [line.strip() for line in text.splitlines() if any(p in line.lower() for p in NARRATION)]


# ------------------------------------------------------------------------------------------- the pages

def test_readme_is_a_front_page():
    n = len((REPO / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail into docs/"


def test_no_broken_relative_links():
    bad = [f"{p.relative_to(REPO)}: {t}" for p in pages() for t in broken_links(p.read_text(), p)]
    assert bad == [], "links to nothing:\n" + "\n".join(bad)


def test_no_ghost_citations():
    bad = [f"{p.relative_to(REPO)}: {t}" for p in pages() for t in ghost_citations(p.read_text(), p)]
    assert bad == [], "cites what the repository does not have:\n" + "\n".join(bad)


def test_no_narration():
    bad = [f"{p.relative_to(REPO)}: {line}" for p in pages() for line in narration(p.read_text())]
    assert bad == [], "say what the reader gets, not how the work went:\n" + "\n".join(bad)


def test_research_reports_are_dated():
    """Measurement narratives live under docs/research/, each named and headed by the date it was measured."""
    reports = [p for p in (REPO / "docs" / "research").glob("*.md") if p.name != "index.md"]
    assert reports
    for p in reports:
        assert re.match(r"\d{4}-\d{2}-\d{2}-", p.name), p.name
        assert p.name[:10] in p.read_text().split("\n\n")[1], f"{p.name}: say the date under the title"


def test_the_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a broken link, a missing page or a page left out of the navigation fails."""
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "index.html").is_file()


# ---------------------------------------------------------------------------------- planted examples

def test_each_check_refuses_a_planted_example(tmp_path):
    page = REPO / "docs" / "index.md"
    assert broken_links("see [the runbook](runbook-gone.md) and [ok](runbook.md#the-sweep)", page) == \
        ["runbook-gone.md"]
    assert broken_links("[out](../../etc/passwd)", page)
    assert broken_links("```\n[not a link](nowhere.md)\n```\n[a site](https://example.org/x)", page) == []
    ghost = "as `harness/nowhere.py` says, and `bench/cc_theory.py` (see STYLE" + ".md)"
    assert ghost_citations(ghost, page) == ["STYLE" + ".md", "harness/nowhere.py"]
    assert ghost_citations("the house " + "rule in /work/" + "sha" + "red/DESIGN" + ".md", page)
    assert ghost_citations("`runs/<campaign>/samples.jsonl`, `mplab run scenarios/nowhere.yaml`", page) == []
    assert narration("Measured this session on two cores.\nThe sweep prints a table.") == \
        ["Measured this session on two cores."]
    assert narration("`mplab status` names the last session of a campaign.") == []
    assert narration("A house " + "rule: under 15 minutes.")
    assert narration("The sweep prints a table.") == []


def test_the_site_build_refuses_a_broken_link(tmp_path):
    """A copy of the guide with one broken link and one page left out of the navigation does not build."""
    import shutil

    for name in ("docs", "mkdocs.yml"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    (tmp_path / "docs" / "index.md").write_text((tmp_path / "docs" / "index.md").read_text()
                                                + "\n[gone](no-such-page.md)\n")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "no-such-page.md" in out.stdout + out.stderr
    (tmp_path / "docs" / "index.md").write_text((REPO / "docs" / "index.md").read_text())
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the navigation\n")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "orphan.md" in out.stdout + out.stderr


@pytest.mark.parametrize("n, ok", [(README_MAX_LINES, True), (README_MAX_LINES + 1, False)])
def test_the_length_check_counts_lines(n, ok):
    assert (len(("x\n" * n).splitlines()) <= README_MAX_LINES) is ok
