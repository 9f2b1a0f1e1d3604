"""`mplab report`: campaigns and datasets -> ``reports/<name>/`` (index.html, figures/, tables/, report.json).

Steps (each reported to ``progress`` as it starts): read the sources, compute the statistics,
the paper's tables and checks, draw every figure family, write the CSVs, the page and
``report.json`` (what was drawn, what was skipped and why, the checks, provenance). The output
directory is ours only if it holds a previous report (``report.json``); anything else is refused.
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import harness
from analysis import html
from analysis.figures import model as model_figs
from analysis.figures import sample as sample_figs
from analysis.figures import setup1, setup2
from analysis.headlines import HEADLINES_FILE, load_headlines
from analysis.load import Study, load_study
from analysis.paper import PAPER_FILE, analog_table, checks_table, load_paper
from analysis.schemes import (display_headlines, display_tables, headline_rows, markdown_table, side_by_side,
                              summary_tables)
from analysis.stats import CI_METHODS, case_stats, exclusion_summary, network_stats, per_sample, receiver_stats
from analysis.style import Palette, Saved, Skipped
from harness.errors import ConfigError

REPORT_SCHEMA_VERSION = 1
STEPS = ("read sources", "statistics", "paper tables and checks", "Setup I figures", "Setup II figures",
         "schemes side by side", "sample close-up", "dataset and model figures", "tables (CSV)", "page")
Progress = Callable[[str, int, int], None]


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
    seconds: float = 0.0


def _prepare_out(out: Path, force: bool) -> None:
    if out.exists() and any(out.iterdir()):
        if not (out / "report.json").exists():
            raise ConfigError(f"{out} exists and is not a report; choose another directory", field="--out")
        if not force:
            raise ConfigError(f"{out} already holds a report; pass --force to replace it", field="--out")
        for sub in ("figures", "tables"):
            if (out / sub).is_dir():
                shutil.rmtree(out / sub)
        for f in ("index.html", "report.json", "schemes.md"):
            (out / f).unlink(missing_ok=True)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(parents=True, exist_ok=True)


def _file_bytes(study: Study) -> float | None:
    sizes = set(study.frame["file_bytes"].dropna().astype(int))
    return float(sizes.pop()) if len(sizes) == 1 else None


def _energy_banner(study: Study) -> str:
    labels = sorted(set(study.frame["energy_label"].dropna()))
    if not labels:
        return "no records"
    src = sorted(set(study.frame["energy_source"].dropna()))
    if src == ["measured"]:
        return "measured by the receivers' meters: " + "; ".join(labels)
    return ("NOT MEASURED on real radios: " if "measured" not in src else "mixed: ") + "; ".join(labels) + \
        ". Every figure that shows energy says so."


def build_report(inputs: list[Path], out: Path, *, model: Path | None = None, tracking_uri: str | None = None,
                 sample: str | None = None, ci: str = "t", paper_file: Path = PAPER_FILE,
                 headlines_file: Path = HEADLINES_FILE, force: bool = False,
                 progress: Progress | None = None, title: str | None = None) -> ReportResult:
    """Build the report of ``inputs`` (campaign and dataset directories) in ``out``.

    Args:
        inputs: ``runs/<campaign>`` and/or ``datasets/<name>`` directories.
        out: ``reports/<name>``; replaced only with ``force`` and only if it holds a report.
        model: ``models/<name>`` for the model figures (predictions on its dataset's test split).
        tracking_uri: MLflow store of the model's run (default ``$MLFLOW_TRACKING_URI``, else ./mlflow.db).
        sample: sample id for the close-up (default: one is chosen; see ``figures.sample.pick_sample``).
        ci: ``t`` or ``bootstrap``.
        headlines_file: the related papers' headlines (``data/paper/related-schemes.yaml``).
    """
    t0 = time.monotonic()
    if ci not in CI_METHODS:
        raise ConfigError(f"unknown interval method {ci!r}; use one of {', '.join(CI_METHODS)}", field="--ci")
    if model is not None and not (Path(model) / "model.json").exists():
        raise ConfigError(f"{model} is not an exported model (no model.json)", field="--model")
    step = iter(range(len(STEPS)))

    def tick(name: str) -> None:
        i = next(step)
        if progress:
            progress(name, i, len(STEPS))

    tick("read sources")
    study = load_study(list(inputs))
    paper = load_paper(paper_file)
    headlines = load_headlines(headlines_file)
    _prepare_out(out, force)
    figs_dir = out / "figures"
    ci_text = CI_METHODS[ci].text
    palette = Palette()
    res = ReportResult(out)

    tick("statistics")
    f = study.frame
    stats = {m: case_stats(f, m, ci) for m in ("energy_j", "throughput_mbit", "mean_power_w")}
    tables: dict[str, tuple[str, pd.DataFrame]] = {
        "case-energy": ("Energy per case (J per receiver)", stats["energy_j"]),
        "case-throughput": ("Throughput per case (Mbit/s per receiver)", stats["throughput_mbit"]),
        "case-power": ("Mean power per case (W per receiver)", stats["mean_power_w"]),
        "receiver-energy": ("Energy per case and receiver (J)", receiver_stats(f, "energy_j", ci)),
        "receiver-throughput": ("Throughput per case and receiver (Mbit/s)", receiver_stats(f, "throughput_mbit", ci)),
        "network-throughput": ("Per access network: interface throughput (Mbit/s) and share of bytes",
                               network_stats(f, ci)),
    }
    if f["tail_energy_j"].notna().any():
        # Records with an accounted tail (the nothing-lost issue): the transfer plus its tail, beside energy_j.
        f = f.assign(energy_with_tail_j=f["energy_j"] + f["tail_energy_j"])
        tables["case-energy-with-tail"] = ("Energy per case including the tail after the transfer (J per receiver)",
                                           case_stats(f, "energy_with_tail_j", ci))
    excluded = exclusion_summary(f)
    # A dataset's own build left records out before the report saw them: list those counts too.
    ds_rows = [{"source": s.name, "reason": f"{reason} (at the dataset's build)", "records": int(n)}
               for s in study.datasets for reason, n in (s.dataset.meta.get("excluded") or {}).items()]
    if ds_rows:
        excluded = pd.concat([excluded, pd.DataFrame(ds_rows)], ignore_index=True)

    tick("paper tables and checks")
    fb = _file_bytes(study)
    a_thr = analog_table(paper, stats["throughput_mbit"], "throughput_mbit", fb)
    a_en = analog_table(paper, stats["energy_j"], "energy_j", fb)
    checks = checks_table(paper, a_en, a_thr)
    res.checks = checks

    tick("Setup I figures")
    # One set of Setup I/II figures per energy label: energies of different profiles or sources never share a line.
    labels = sorted(set(stats["energy_j"].loc[stats["energy_j"]["n_samples"] > 0, "energy_label"])) or [None]
    s1: list[Saved | Skipped] = []
    s2: list[Saved | Skipped] = []
    policies = set(f["policy"].dropna())
    for i, label in enumerate(labels):
        tag = f"-{i + 1}" if len(labels) > 1 else ""
        e, t = (_only(stats["energy_j"], label), _only(stats["throughput_mbit"], label))
        if len(labels) > 1 and not e["scheme"].isin(setup1.MODES).any():
            continue  # a label without Setup I cases (e.g. a Setup II campaign beside a Setup I one)
        s1 += [_tagged(x, tag, label) for x in (setup1.one_receiver(e, t, palette, figs_dir, ci_text),
                                                  setup1.receivers(e, t, palette, figs_dir, ci_text))]

    tick("Setup II figures")
    for i, label in enumerate(labels):
        tag = f"-{i + 1}" if len(labels) > 1 else ""
        e, t = (_only(stats["energy_j"], label), _only(stats["throughput_mbit"], label))
        pol = policies & set(e["scheme"]) if label is not None else policies
        if len(labels) > 1 and not pol:
            continue  # a label without policies (e.g. a Setup I campaign beside a Setup II one)
        items = [setup2.is_vs_tuned(e, pol, palette, figs_dir, ci_text),
                 *setup2.policies_vs_receivers(e, t, pol, palette, figs_dir, ci_text),
                 setup2.scatter(_only(per_sample(f, "energy_j"), label), _only(per_sample(f, "throughput_mbit"), label),
                                e, t, pol, palette, figs_dir, ci_text)]
        s2 += [_tagged(x, tag, label) for x in items]
    if not s2:
        s2 = [Skipped("setup2", "Setup II figures", setup2.NO_POLICIES)]

    tick("schemes side by side")
    sch: list[Saved | Skipped] = []
    sch_tables: list[dict] = []
    md: list[str] = []
    if policies:
        res.schemes = side_by_side(f, headlines, ci)
        res.headlines = headline_rows(f, headlines)
        tables["schemes"] = ("Every policy side by side (numbers)", res.schemes)
        tables["schemes-headlines"] = ("The related papers' headlines beside mplab (numbers)", res.headlines)
        for i, label in enumerate(labels):
            tag = f"-{i + 1}" if len(labels) > 1 else ""
            e, t = (_only(stats["energy_j"], label), _only(stats["throughput_mbit"], label))
            pol = policies & set(e["scheme"]) if label is not None else policies
            if len(labels) > 1 and not pol:
                continue
            sch.append(_tagged(setup2.schemes_by_receivers(
                _only(per_sample(f, "energy_j"), label), _only(per_sample(f, "throughput_mbit"), label),
                e, t, pol, palette, figs_dir, ci_text), tag, label))
        for (label, cc), view in summary_tables(res.schemes, headlines):
            sch_tables.append({"title": f"Summary, {cc}: {label}", "csv": "tables/schemes.csv",
                               "html": _mark_losses(html.table_html(view, left=True)),
                               "markdown": markdown_table(view)})
        for (label, cc, n), view in display_tables(res.schemes):
            sch_tables.append({"title": f"{n} receivers, {cc}: {label}", "csv": "tables/schemes.csv",
                               "html": _mark_losses(html.table_html(view, left=True)), "markdown": markdown_table(view)})
        for (label, cc), view in display_headlines(res.headlines):
            sch_tables.append({"title": f"The related papers' headlines beside mplab: {cc}, {label}",
                               "csv": "tables/schemes-headlines.csv", "html": html.table_html(view, left=True),
                               "markdown": markdown_table(view)})
    else:
        sch = [Skipped("setup2-schemes", "Every policy side by side", setup2.NO_POLICIES)]
    if not s1:
        s1 = [Skipped("setup1", "Setup I figures", "no Setup I cases (records with a mode and no policy)")]

    tick("sample close-up")
    camps = study.campaigns
    if sample:
        owner = next((s for s in camps if sample in set(f.loc[f["campaign"] == s.name, "sample_id"])), None)
        if owner is None:
            raise ConfigError(f"sample {sample!r} is in none of the campaigns given", field="--sample")
        sc = [sample_figs.closeup(f, owner, palette, figs_dir, sample)]
    elif camps:
        # The first campaign that has an ok sample with raw output (generated campaigns have none).
        sc = [next((r for r in (sample_figs.closeup(f, c, palette, figs_dir) for c in camps)
                    if isinstance(r, Saved)), None)
              or Skipped(sample_figs.NAME, sample_figs.TITLE, "no campaign given has an ok sample with raw output")]
    else:
        sc = [Skipped(sample_figs.NAME, sample_figs.TITLE, "no campaign given (datasets carry no raw output)")]

    tick("dataset and model figures")
    dm: list[Saved | Skipped] = [
        _tagged(model_figs.distributions(_only(f, label), palette, figs_dir), f"-{i + 1}" if len(labels) > 1 else "",
                label) for i, label in enumerate(labels)]
    if model is None:
        dm.append(Skipped("model", "Model figures", "no --model given"))
    else:
        got = model_figs.model_test_rows(Path(model), study.datasets)
        if isinstance(got, str):
            dm.append(Skipped("model", "Model: predicted vs measured, error per case", got))
        else:
            test, where, label = got
            dm.append(model_figs.predicted_vs_measured(test, where, Path(model).name, palette, figs_dir, label))
            saved, per_case = model_figs.error_per_case(test, palette, figs_dir, label)
            dm.append(saved)
            tables["model-error-per-case"] = ("Model error per case on the test split", per_case)
        dm.append(model_figs.training_curve(Path(model), tracking_uri, figs_dir))

    tick("tables (CSV)")
    tables["paper-table2-throughput"] = ("Table 2 analog: throughput (Mbit/s per receiver)", a_thr)
    tables["paper-table3-energy"] = ("Table 3 analog: energy (J per receiver)", a_en)
    tables["checks"] = ("Reproduction checks", checks)
    tables["excluded"] = ("Records left out, by reason", excluded)
    for key, (_, df) in tables.items():
        p = out / "tables" / f"{key}.csv"
        df.to_csv(p, index=False)
        res.tables[key] = p

    tick("page")
    all_items = s1 + s2 + sch + sc + dm
    res.figures = [i for i in all_items if isinstance(i, Saved)]
    res.skipped = [i for i in all_items if isinstance(i, Skipped)]
    res.seconds = time.monotonic() - t0
    from harness.campaign.metadata import git_info

    git = git_info() or {}
    commit = f"{git['commit'][:12]}{' (dirty)' if git.get('dirty') else ''}" if git.get("commit") else None
    ctx = {
        "title": title or f"mplab report: {', '.join(s.name for s in study.sources)}",
        "built": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "mplab_version": harness.__version__,
        "mplab_commit": commit, "seconds": f"{res.seconds:.1f}",
        "inputs": ", ".join(str(p) for p in inputs), "energy_banner": _energy_banner(study),
        "sources": study.sources, "ci_text": ci_text, "notes": study.notes,
        "excluded": html.table_html(excluded, left=True) if len(excluded) else "",
        "checks": html.table_html(checks, ("status", "paper_status"), left=True) if len(checks) else
        "<p>No case matches a column of the paper.</p>",
        "paper_citation": "Paper: " + paper.citation_text, "paper_file_size": paper.file_size,
        "analog_tables": [{"title": f"{tables[k][0]}: {label}", "csv": f"tables/{k}.csv",
                           "html": html.table_html(view)}
                          for k in ("paper-table2-throughput", "paper-table3-energy")
                          for label, view in _analog_views(tables[k][1])],
        "sections": [html.section("setup1", "Setup I: plain MPTCP", s1, out),
                     html.section("setup2", "Setup II: policies", s2, out),
                     html.section("schemes", "Setup II: every policy side by side, with the related papers' "
                                  "headlines", sch, out, tables=sch_tables, intro=SCHEMES_INTRO if sch_tables else ""),
                     html.section("sample", "One sample up close", sc, out),
                     html.section("model", "Dataset and model", dm, out)],
        "stat_tables": [{"title": tables[k][0], "csv": f"tables/{k}.csv", "html": html.table_html(tables[k][1])}
                        for k in tables if k.startswith(("case-", "receiver-", "network-", "model-"))],
    }
    (out / "index.html").write_text(html.render(ctx))
    if sch_tables:
        res.markdown = out / "schemes.md"
        res.markdown.write_text(_schemes_markdown(ctx, sch_tables, [x for x in sch if isinstance(x, Saved)], out))
    doc = {"schema_version": REPORT_SCHEMA_VERSION, "created_at": ctx["built"], "mplab_version": harness.__version__,
           "mplab_commit": commit, "inputs": [str(p) for p in inputs], "ci": ci_text, "seconds": res.seconds,
           "sources": [{k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v)
                        for k, v in asdict(s).items() if k not in ("campaign", "dataset")} for s in study.sources],
           "figures": [{"name": s.name, "png": s.png.name, "svg": s.svg.name, "shows_energy": s.shows_energy}
                       for s in res.figures],
           "skipped": [asdict(s) for s in res.skipped],
           "checks": checks.to_dict("records"), "tables": {k: p.name for k, p in res.tables.items()},
           "markdown": res.markdown.name if res.markdown else None,
           "notes": study.notes}
    (out / "report.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return res


def _only(df: pd.DataFrame, label: str | None) -> pd.DataFrame:
    return df if label is None else df[df["energy_label"] == label]


def _tagged(item: Saved | Skipped, tag: str, label: str | None) -> Saved | Skipped:
    """Give a figure drawn for one of several energy labels a unique name (its files renamed) and say which."""
    if not tag:
        return item
    if isinstance(item, Skipped):
        return Skipped(item.name + tag, f"{item.title} [{label}]", item.reason)
    png, svg = item.png.with_name(item.name + tag + ".png"), item.svg.with_name(item.name + tag + ".svg")
    item.png.replace(png)
    item.svg.replace(svg)
    return Saved(item.name + tag, f"{item.title} [{label}]", item.caption, png, svg, item.shows_energy)


def _analog_views(t: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The side-by-side tables as shown, one per energy label: rows = node count, per paper column the
    paper's value beside ours (mean [95% interval] n=samples); energies also per MB (paper: 60 MB)."""
    views = []
    if t.empty:
        return views
    energy = "paper_j_per_mb" in t
    for label, d in t.groupby("energy_label", dropna=False, sort=True):
        if d["ours_mean"].isna().all():
            continue
        d = d[d["paper"].notna() | d["ours_mean"].notna()]
        cols = {}
        index = sorted(set(d["n_receivers"]))
        for key in dict.fromkeys(d["column"]):
            dk = d[d["column"] == key]
            name = dk["label"].iloc[0] + (" (held out)" if dk["held_out"].iloc[0] else "")
            rows = [r for _, r in dk.set_index("n_receivers").reindex(index).iterrows()]
            cols[(name, "paper")] = [_cell(r["paper"], None, None, None, r.get("paper_j_per_mb") if energy else None)
                                    for r in rows]
            cols[(name, "ours")] = [_cell(r["ours_mean"], r["ours_ci_low"], r["ours_ci_high"], r["ours_n_samples"],
                                          r.get("ours_j_per_mb") if energy else None) for r in rows]
        v = pd.DataFrame(cols, index=pd.Index(index, name="N"))
        views.append((str(label), v.reset_index()))
    return views


def _cell(mean, lo, hi, n, per_mb) -> str:
    if pd.isna(mean):
        return "–"
    s = f"{mean:.4g}"
    if lo is not None and pd.notna(lo):
        s += f" [{lo:.4g}, {hi:.4g}]"
    if n is not None:
        s += f" n={int(n)}"
    if per_mb is not None and pd.notna(per_mb):
        s += f" ({per_mb:.3g}/MB)"
    return s


SCHEMES_INTRO = (
    "Per receiver count: every policy's throughput, energy (the transfer window) and energy per bit "
    "(a receiver's energy over the megabits it received), mean [95% interval], and the change of each mean "
    "against two baselines of the same receivers: all-both (MPTCP on both paths, no controller: the papers' "
    "\"MPTCP\") and the best single path (all-wifi or all-lte, whichever has the lower J/Mbit there). Beside "
    "each scheme, its paper's first headline and the same kind of change computed from these records. A "
    "policy loses to a baseline when its mean is worse on its paper's headline metric (J/Mbit when it has "
    "none); \"within noise\" (in the summary \"(noise)\") when the Welch 95% interval of the difference of "
    "per-sample means includes zero. The papers' numbers come from their own simulators and testbeds (column \"setting\"): compare "
    "directions, not sizes.")


def _mark_losses(table: str) -> str:
    """Make every "loses to" in a rendered table stand out (the text was escaped before)."""
    return (table.replace("loses to", '<b class="lose">loses to</b>')
            .replace("<td>loses", '<td><b class="lose">loses</b>').replace("/ loses", '/ <b class="lose">loses</b>'))


def _schemes_markdown(ctx: dict, tables: list[dict], figures: list[Saved], out: Path) -> str:
    lines = [f"# Every policy side by side ({ctx['title']})", "",
             f"Built {ctx['built']} by mplab {ctx['mplab_version']}"
             + (f" (commit {ctx['mplab_commit']})" if ctx["mplab_commit"] else "") + f". Inputs: {ctx['inputs']}.",
             "", f"Energy: {ctx['energy_banner']}", "", f"Statistics: {ctx['ci_text']}.", "", SCHEMES_INTRO, ""]
    for t in tables:
        lines += [f"## {t['title']}", "", t["markdown"], ""]
    for fig in figures:
        lines += [f"![{fig.title}]({fig.png.relative_to(out).as_posix()})", "", fig.caption, ""]
    return "\n".join(lines)
