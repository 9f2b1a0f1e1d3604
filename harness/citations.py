"""Citations of the papers mplab implements: ``harness/data/paper/citations.yaml``, read once.

Dataset cards, model cards, Croissant files and ``mplab controller policies`` cite from here; the
file gives each paper's title, authors and venue as the paper's own first page does, and which
mplab policies follow it. Nothing here invents a field the file leaves out (one paper names no
venue or year: its citation says so instead).

An installed wheel carries no ``data/`` folder: then ``load_citations`` returns an empty mapping
and the cards say the citation file was not found, rather than citing from memory.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.errors import ConfigError
from harness.resources import paper_file

REFERENCE_KEY = "sensors-2023-7699"


@dataclass(frozen=True)
class Citation:
    """One paper: what its first page says, and the mplab policies that follow it."""

    key: str
    title: str
    authors: tuple[str, ...]
    policies: tuple[str, ...] = ()
    role: str = "related"
    journal: str | None = None
    year: int | None = None
    volume: int | None = None
    issue: int | None = None
    article: int | None = None
    publisher: str | None = None
    doi: str | None = None
    note: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def venue(self) -> str:
        """``Sensors 2023, 23(18), 7699`` style, from the fields the file gives."""
        parts = [p for p in (self.journal, str(self.year) if self.year else None) if p]
        out = " ".join(parts)
        if self.volume is not None:
            out += f", {self.volume}" + (f"({self.issue})" if self.issue is not None else "")
        if self.article is not None:
            out += f", {self.article}"
        return out

    def text(self) -> str:
        """One line: authors, title, venue, DOI (and the note when the venue is not known)."""
        s = f"{', '.join(self.authors)}. \"{self.title}\"."
        if self.venue:
            s += f" {self.venue}."
        elif self.publisher:
            s += f" {self.publisher}."
        if self.doi:
            s += f" doi:{self.doi}."
        if self.note and not self.venue:
            s += f" ({self.note}.)"
        return s

    @property
    def url(self) -> str | None:
        return f"https://doi.org/{self.doi}" if self.doi else None

    def bibtex(self) -> str:
        """A BibTeX entry (``@article`` with a journal, ``@misc`` without)."""
        kind = "article" if self.journal else "misc"
        fields = {"title": "{" + self.title + "}", "author": " and ".join(self.authors), "journal": self.journal,
                  "year": self.year, "volume": self.volume, "number": self.issue, "pages": self.article,
                  "publisher": self.publisher, "doi": self.doi, "note": self.note if not self.journal else None}
        body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items() if v is not None)
        return f"@{kind}{{{self.key},\n{body}\n}}"


def _file() -> Path | None:
    path = paper_file("citations.yaml")
    return path if path.is_file() else None


def parse_citations(doc: object, source: str) -> dict[str, Citation]:
    """The citations of a parsed citations.yaml; ``ConfigError`` naming the entry and field otherwise."""
    papers = doc.get("papers") if isinstance(doc, dict) else None
    if not isinstance(papers, dict) or not papers:
        raise ConfigError("no 'papers' mapping", source=source, field="papers")
    out = {}
    known = set(Citation.__dataclass_fields__) - {"key", "extra"}
    for key, p in papers.items():
        if not isinstance(p, dict) or not p.get("title") or not p.get("authors"):
            raise ConfigError("each paper needs a title and authors", source=source, field=f"papers.{key}")
        kw = {k: v for k, v in p.items() if k in known}
        kw["authors"] = tuple(str(a) for a in p["authors"])
        kw["policies"] = tuple(str(a) for a in p.get("policies") or ())
        out[str(key)] = Citation(key=str(key), extra={k: v for k, v in p.items() if k not in known}, **kw)
    return out


@functools.cache
def load_citations() -> dict[str, Citation]:
    """Every paper by key, from ``harness/data/paper/citations.yaml`` (empty when the file is not there)."""
    path = _file()
    if path is None:
        return {}
    return parse_citations(yaml.safe_load(path.read_text()), str(path))


def reference() -> Citation | None:
    """The reference paper (Sensors 23:7699), or None without the citation file."""
    return load_citations().get(REFERENCE_KEY)


def for_policy(policy: str) -> Citation | None:
    """The paper a policy follows (None for policies of no paper: all-wifi, marginal-efficiency, ...)."""
    for c in load_citations().values():
        if policy in c.policies:
            return c
    return None
