"""How every figure looks: one colour per mode/policy, one marker per congestion control, saving.

A mode and the policy that means the same thing share a colour (``wifi`` and ``all-wifi``,
``both`` and ``all-both``), so a reader can follow a scheme from Setup I to Setup II. Unknown
policies get colours from a fixed list in the order first seen, the same in every figure of a
report (``Palette`` is built once per report). Figures are written as PNG (embedded in the page)
and SVG (text kept as text, so it can be searched and checked).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: reports are built on servers and in tests
import matplotlib.pyplot as plt

plt.rcParams.update({"svg.fonttype": "none", "figure.dpi": 100, "savefig.dpi": 110, "font.size": 9,
                     "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
                     "legend.fontsize": 8, "legend.frameon": False})

FIXED = {
    "wifi": "#1f6fb4", "all-wifi": "#1f6fb4",
    "lte": "#e07b00", "all-lte": "#e07b00",
    "both": "#7a3fa0", "all-both": "#7a3fa0",
    "ref-is": "#2f9a48", "ref-is-tuned": "#c62d3a",
}
SPARE = ("#17becf", "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f", "#393b79", "#637939", "#843c39")
MARKERS = {"lia": "o", "olia": "s", "balia": "^", "wvegas": "D", "cubic": "v", "reno": "P"}
SCHEME_ORDER = ("wifi", "lte", "both", "all-wifi", "all-lte", "all-both", "ref-is", "ref-is-tuned")
CC_ORDER = ("lia", "olia", "balia", "wvegas", "cubic")


@dataclass
class Palette:
    """Colour per scheme (mode or policy), stable for the whole report."""

    extra: dict[str, str] = field(default_factory=dict)

    def colour(self, scheme: str) -> str:
        if scheme in FIXED:
            return FIXED[scheme]
        if scheme not in self.extra:
            self.extra[scheme] = SPARE[len(self.extra) % len(SPARE)]
        return self.extra[scheme]


def marker(cc: str) -> str:
    return MARKERS.get(cc, "x")


def order_schemes(schemes) -> list[str]:
    """Modes and the known policies first, in a reading order; others after, sorted."""
    s = set(schemes)
    return [x for x in SCHEME_ORDER if x in s] + sorted(s - set(SCHEME_ORDER))


def order_ccs(ccs) -> list[str]:
    s = set(ccs)
    return [x for x in CC_ORDER if x in s] + sorted(s - set(CC_ORDER))


def label_energy(fig, labels) -> None:
    """Say on the figure where its energy comes from (``emulated energy (profile NAME)``)."""
    text = "; ".join(sorted({str(x) for x in labels if x}))
    if text:
        # Below everything (bbox_inches="tight" grows the canvas to hold it), clear of the axis labels.
        fig.text(0.995, -0.02, text, ha="right", va="top", fontsize=7.5, color="#444444", style="italic")


@dataclass(frozen=True)
class Saved:
    """A written figure: its name, files and words."""

    name: str
    title: str
    caption: str
    png: Path
    svg: Path
    shows_energy: bool


def save(fig, out_dir: Path, name: str, title: str, caption: str, shows_energy: bool) -> Saved:
    """Write ``name.png`` and ``name.svg`` under ``out_dir`` and close the figure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png, bbox_inches="tight")
    fig.savefig(svg, bbox_inches="tight")
    plt.close(fig)
    return Saved(name, title, caption, png, svg, shows_energy)


@dataclass(frozen=True)
class Skipped:
    """A figure that could not be drawn from these inputs, and why (listed in the report)."""

    name: str
    title: str
    reason: str
