"""The papers' citations (harness/data/paper/citations.yaml): complete, one per paper, and what the cards cite."""
from __future__ import annotations

import pytest
import yaml

from harness import citations
from harness.errors import ConfigError

from conftest import REPO


def test_five_papers_with_title_authors_and_the_policies_they_stand_for():
    c = citations.load_citations()
    assert len(c) == 5
    for key, paper in c.items():
        assert paper.title and len(paper.authors) >= 3, key
        assert "not recorded" not in paper.text()
    ref = citations.reference()
    assert ref.doi == "10.3390/s23187699" and ref.authors[0] == "Ramiza Shams" and ref.venue == "Sensors 2023, 23(18), 7699"
    assert citations.for_policy("es-mptcp").doi == "10.3390/electronics11030490"
    assert citations.for_policy("ee-mptcp").article == 3104 and citations.for_policy("eemptcp").journal == "IEEE Access"
    assert citations.for_policy("all-wifi") is None and citations.for_policy("marginal-efficiency") is None
    mp = citations.for_policy("mp-sdn")
    assert mp.year is None and "venue" in mp.text()  # no venue in the copy: said, not guessed
    assert mp.bibtex().startswith("@misc{") and ref.bibtex().startswith("@article{sensors-2023-7699,")


def test_the_paper_tables_file_cites_the_same_paper():
    doc = yaml.safe_load((REPO / "harness" / "data" / "paper" / "sensors-2023-7699.yaml").read_text())
    text = " ".join(doc["citation"]["text"].split())
    ref = citations.reference()
    assert doc["citation"]["key"] == ref.key and ref.title in text and ref.doi in text
    for col in ("lte-sptcp", "wifi-sptcp"):  # the paper never names these columns' TCP variant
        assert doc["columns"][col]["cc_assumed"] is True


def test_a_broken_citation_file_is_one_clear_line():
    with pytest.raises(ConfigError, match="papers.x: each paper needs a title and authors"):
        citations.parse_citations({"papers": {"x": {"title": "T"}}}, "c.yaml")
    with pytest.raises(ConfigError, match="no 'papers' mapping"):
        citations.parse_citations([], "c.yaml")


#: The developers' notes folder, spelt in two pieces so that this guard does not cite it itself.
NOTES_DIR = "/".join(("shared", "reference"))


def test_nothing_cites_notes_users_do_not_have():
    """Whatever code, docs, data and tests cite lives in the repository (docs/reference/), not in a notes folder."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    bad = [f for f in files if f.endswith((".py", ".md", ".yaml", ".yml", ".html", ".txt"))
           and any(s in (REPO / f).read_text(errors="replace") for s in (NOTES_DIR, "seed-algorithms.md",
                                                                         "components.md", "reference notes"))
           and f != "tests/test_citations.py"]
    assert bad == [], bad
