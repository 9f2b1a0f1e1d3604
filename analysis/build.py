"""The shared state of one report while it is built (``analysis.report``'s sections fill it and
``analysis.page`` reads it): what was written, the tables, and the inputs.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.load import Study
from analysis.paper import PaperTables
from analysis.stats import CI_METHODS
from analysis.style import Palette, Saved, Skipped

Item = Saved | Skipped


@dataclass
class ReportResult:
    """What ``build_report`` wrote."""

    path: Path
    figures: list[Saved] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    checks: pd.DataFrame | None = None
    tables: dict[str, Path] = field(default_factory=dict)
    schemes: pd.DataFrame | None = None       # analysis.schemes.side_by_side (None without policies)
    headlines: pd.DataFrame | None = None     # analysis.schemes.headline_rows
    markdown: Path | None = None              # schemes.md: the side-by-side tables and figure as markdown
    rerun: pd.DataFrame | None = None         # analysis.compare.compare_cases (None without a rerun)
    rerun_manifests: pd.DataFrame | None = None
    rerun_summary: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Table:
    """A table of the report: its CSV (raw columns) and a title that says what it holds (unit, n)."""

    title: str
    data: pd.DataFrame
    unit: str = ""


@dataclass
class Build:
    """What the sections of one report share while it is built."""

    inputs: list[Path]
    out: Path
    model: Path | None
    tracking_uri: str | None
    sample: str | None
    ci: str
    title: str | None
    paper_file: Path
    headlines_file: Path
    res: ReportResult
    palette: Palette = field(default_factory=Palette)
    study: Study | None = None
    paper: PaperTables | None = None
    headlines: dict | None = None
    frame: pd.DataFrame | None = None
    stats: dict[str, pd.DataFrame] = field(default_factory=dict)
    labels: list[str | None] = field(default_factory=list)
    policies: set[str] = field(default_factory=set)
    tables: dict[str, Table] = field(default_factory=dict)
    analog: dict[str, pd.DataFrame] = field(default_factory=dict)
    excluded: pd.DataFrame | None = None
    sections: dict[str, list[Item]] = field(default_factory=dict)
    section_tables: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def ci_text(self) -> str:
        return CI_METHODS[self.ci].text

    @property
    def figs_dir(self) -> Path:
        return self.out / "figures"

    def per_label(self) -> Iterator[tuple[str, str | None, pd.DataFrame, pd.DataFrame, set[str]]]:
        """Per energy label: (file-name tag, label, energy stats, throughput stats, its policies).

        Energies of different profiles or sources never share a figure: one set per label, tagged
        ``-1``, ``-2``... when there are several.
        """
        for i, label in enumerate(self.labels):
            tag = f"-{i + 1}" if len(self.labels) > 1 else ""
            e, t = only(self.stats["energy_j"], label), only(self.stats["throughput_mbit"], label)
            pol = self.policies & set(e["scheme"]) if label is not None else self.policies
            yield tag, label, e, t, pol

    @property
    def several_labels(self) -> bool:
        return len(self.labels) > 1


def only(df: pd.DataFrame, label: str | None) -> pd.DataFrame:
    return df if label is None else df[df["energy_label"] == label]
