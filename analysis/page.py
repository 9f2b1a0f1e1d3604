"""What the report page shows, built from a finished ``analysis.build.Build``: the template's
context (tables as a reader sees them, ``analysis.tables``), ``report.json`` and ``schemes.md``.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import harness
from analysis import html, tables
from analysis.load import Study
from analysis.build import Build
from analysis.style import Saved

REPORT_SCHEMA_VERSION = 1
#: Statistics tables on the page, in order (the rest are shown in their own sections or only as CSV).
STAT_TABLES = ("case-throughput-total", "case-throughput", "case-energy", "case-energy-with-tail", "case-power",
               "network-throughput", "receiver-throughput", "receiver-energy", "model-error-per-case")
SECTION_TITLES = {
    "setup1": "Setup I: plain MPTCP (no controller)",
    "setup2": "Setup II: policies",
    "schemes": "Setup II: every policy side by side, with the related papers' headlines",
    "rerun": "Rerun: the second campaign of a scenario beside the first",
    "sample": "One sample up close",
    "model": "Dataset and model",
}
RERUN_INTRO = (
    "Two campaigns of the same scenario (A, the first given, and B). Per case: both means, the difference "
    "B - A with its Welch 95% interval over per-sample values, and a verdict: drift when the interval "
    "excludes zero (beyond the samples' own noise), within noise otherwise. Throughput is the network total "
    "(sum over a sample's receivers), energy the per-receiver mean. Then every manifest field that decides a "
    "result and differs (kernel, versions, inventory, power profile, commit...), with the key fields even when "
    "equal.")


SCHEMES_INTRO = (
    "Per receiver count: every policy's throughput, energy (the transfer window) and energy per bit "
    "(a receiver's energy over the megabits it received), mean [95% interval], and the change of each mean "
    "against two baselines of the same receivers: all-both (MPTCP on both paths, no controller: the papers' "
    "\"MPTCP\") and the best single path (all-wifi or all-lte, whichever has the lower J/Mbit there). Beside "
    "each scheme, its paper's first headline and the same kind of change computed from these records. A "
    "policy loses to a baseline when its mean is worse on its paper's headline metric (J/Mbit when it has "
    "none); \"within noise\" (in the summary \"(noise)\") when the Welch 95% interval of the difference of "
    "per-sample means includes zero. The papers' numbers come from their own simulators and testbeds "
    "(column \"setting\"): compare "
    "directions, not sizes.")


def energy_banner(study: Study) -> str:
    """The line on top of the page: where the energy comes from (measured, emulated with which profile)."""
    labels = sorted(set(study.frame["energy_label"].dropna()))
    if not labels:
        return "no records"
    src = sorted(set(study.frame["energy_source"].dropna()))
    if src == ["measured"]:
        return "measured by the receivers' meters: " + "; ".join(labels)
    return ("NOT MEASURED on real radios: " if "measured" not in src else "mixed: ") + "; ".join(labels) + \
        ". Every figure that shows energy says so."


def _commit() -> str | None:
    from harness.campaign.metadata import git_info

    git = git_info() or {}
    return f"{git['commit'][:12]}{' (dirty)' if git.get('dirty') else ''}" if git.get("commit") else None


def _labelled(title: str, label: str | None, several: bool) -> str:
    return f"{title} [{label}]" if label and several else title


def _stat_tables(b: Build) -> list[dict]:
    out = []
    for key in STAT_TABLES:
        if key not in b.tables:
            continue
        t = b.tables[key]
        views = tables.by_label(t.data)
        for label, d in views:
            view = tables.case_view(d, t.unit) if t.unit else tables.plain_view(d)
            keys = sum(1 for c in ("cc", "n_receivers", "scheme", "receiver", "network") if c in d)
            out.append({"title": _labelled(t.title, label, len(views) > 1), "csv": f"tables/{key}.csv",
                        "html": html.table_html(view, key_cols=keys)})
    return out


def _analog_tables(b: Build) -> list[dict]:
    out = []
    for key in ("paper-table2-throughput", "paper-table3-energy"):
        for label, view in tables.analog_views(b.tables[key].data):
            out.append({"title": f"{b.tables[key].title}: {label}", "csv": f"tables/{key}.csv",
                        "html": html.table_html(view)})
    return out


def _checks(b: Build) -> list[dict]:
    checks = b.res.checks
    if checks is None or not len(checks):
        return []
    return [{"title": label or "", "html": html.table_html(tables.plain_view(d), ("ours", "the paper's own values"),
                                                           left=True)}
            for label, d in tables.by_label(checks)]


def _sections(b: Build) -> list[dict]:
    intro = {"schemes": SCHEMES_INTRO, "rerun": RERUN_INTRO}
    out = []
    for sid, title in SECTION_TITLES.items():
        items, tabs = b.sections.get(sid), b.section_tables.get(sid, [])
        if items is None and not tabs:
            continue  # a section that does not apply (the rerun without two campaigns of one scenario)
        out.append(html.section(sid, title, items or [], b.out, tables=tabs, intro=intro.get(sid, "") if tabs else ""))
    return out


def context(b: Build) -> dict:
    """The template's context."""
    study = b.study
    return {
        "title": b.title or f"mplab report: {', '.join(s.name for s in study.sources)}",
        "built": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "mplab_version": harness.__version__,
        "mplab_commit": _commit(), "seconds": f"{b.res.seconds:.1f}",
        "inputs": ", ".join(str(p) for p in b.inputs), "energy_banner": energy_banner(b.study),
        "sources": study.sources, "ci_text": b.ci_text, "notes": study.notes,
        "excluded": html.table_html(tables.plain_view(b.excluded), left=True) if len(b.excluded) else "",
        "checks": _checks(b),
        "paper_citation": "Paper: " + b.paper.citation_text, "paper_file_size": b.paper.file_size,
        "analog_tables": _analog_tables(b),
        "sections": _sections(b),
        "stat_tables": _stat_tables(b),
    }


def report_json(b: Build, ctx: dict) -> dict:
    """``report.json``: what was drawn and skipped, the checks, the tables, provenance."""
    res = b.res
    return {"schema_version": REPORT_SCHEMA_VERSION, "created_at": ctx["built"], "mplab_version": harness.__version__,
            "mplab_commit": ctx["mplab_commit"], "inputs": [str(p) for p in b.inputs], "ci": b.ci_text,
            "seconds": res.seconds,
            "sources": [{k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v)
                         for k, v in asdict(s).items() if k not in ("campaign", "dataset")} for s in b.study.sources],
            "figures": [{"name": s.name, "png": s.png.name, "svg": s.svg.name, "shows_energy": s.shows_energy}
                        for s in res.figures],
            "skipped": [asdict(s) for s in res.skipped],
            "checks": res.checks.to_dict("records"), "tables": {k: p.name for k, p in res.tables.items()},
            "markdown": res.markdown.name if res.markdown else None,
            "rerun": res.rerun_summary,
            "notes": b.study.notes}


def schemes_markdown(ctx: dict, tabs: list[dict], figures: list[Saved], out: Path) -> str:
    """``schemes.md``: the side-by-side tables and figure as markdown."""
    lines = [f"# Every policy side by side ({ctx['title']})", "",
             f"Built {ctx['built']} by mplab {ctx['mplab_version']}"
             + (f" (commit {ctx['mplab_commit']})" if ctx["mplab_commit"] else "") + f". Inputs: {ctx['inputs']}.",
             "", f"Energy: {ctx['energy_banner']}", "", f"Statistics: {ctx['ci_text']}.", "",
             SCHEMES_INTRO, ""]
    for t in tabs:
        lines += [f"## {t['title']}", "", t["markdown"], ""]
    for fig in figures:
        lines += [f"![{fig.title}]({fig.png.relative_to(out).as_posix()})", "", fig.caption, ""]
    return "\n".join(lines)
