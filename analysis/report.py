"""`mplab report`: campaigns and datasets -> ``reports/<name>/`` (index.html, figures/, tables/, report.json).

A pipeline of named sections (``SECTIONS``), each a function of the shared ``Build`` reported
to ``progress`` as it starts: read the sources, compute the statistics, the paper's tables and
checks, draw every figure family, compare a rerun with the run before it, write the CSVs, the
page and ``report.json`` (what was drawn, what was skipped and why, the checks, provenance). The
output directory is ours only if it holds a previous report (``report.json``); anything else is
refused.

Every table says what it holds: per receiver (a sample's value is the mean over its receivers)
or network total (their sum), its unit and its n. The paper's Table 2 is read as network totals
and Table 3 as per-node means (``analysis.paper``), and ours is put beside each in that reading.
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analysis import compare, html, tables
from analysis.page import REPORT_SCHEMA_VERSION, SCHEMES_INTRO  # noqa: F401 - part of this module's API
from analysis.figures import model as model_figs
from analysis.figures import sample as sample_figs
from analysis.figures import setup1, setup2
from analysis.headlines import HEADLINES_FILE, load_headlines
from analysis.load import Study, load_study
from analysis.paper import PAPER_FILE, PaperTables, analog_table, checks_table, load_paper
from analysis.schemes import (display_headlines, display_tables, headline_rows, markdown_table, side_by_side,
                              summary_tables)
from analysis.stats import CI_METHODS, case_stats, exclusion_summary, network_stats, per_sample, receiver_stats
from analysis.page import context, report_json, schemes_markdown
from analysis.build import Build, Item, ReportResult, Table, only as _only
from analysis.style import Saved, Skipped
from harness.errors import ConfigError

Progress = Callable[[str, int, int], None]
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


# ---------------------------------------------------------------- sections

def read_sources(b: Build) -> None:
    """The campaigns and datasets, the paper's tables and the related papers' headlines."""
    b.study = load_study(list(b.inputs))
    b.paper = load_paper(b.paper_file)
    b.headlines = load_headlines(b.headlines_file)


def statistics(b: Build) -> None:
    """Per-case statistics: per receiver (energy, throughput, power) and network totals (throughput)."""
    f = b.frame = b.study.frame
    ci = b.ci
    b.stats = {m: case_stats(f, m, ci) for m in ("energy_j", "throughput_mbit", "mean_power_w")}
    b.stats["throughput_total"] = case_stats(f, "throughput_mbit", ci, how="total")
    t = b.tables
    t["case-energy"] = Table("Energy per case: per receiver (J; n = samples)", b.stats["energy_j"], "J")
    t["case-throughput"] = Table("Throughput per case: per receiver (Mbit/s; n = samples)",
                                 b.stats["throughput_mbit"], "Mbit/s")
    t["case-throughput-total"] = Table("Throughput per case: network total, the sum over a sample's receivers "
                                       "(Mbit/s; n = samples with every receiver)", b.stats["throughput_total"],
                                       "Mbit/s")
    t["case-power"] = Table("Mean power per case: per receiver (W; n = samples)", b.stats["mean_power_w"], "W")
    t["receiver-energy"] = Table("Energy per case and receiver (J; n = that receiver's records)",
                                 receiver_stats(f, "energy_j", ci), "J")
    t["receiver-throughput"] = Table("Throughput per case and receiver (Mbit/s; n = that receiver's records)",
                                     receiver_stats(f, "throughput_mbit", ci), "Mbit/s")
    t["network-throughput"] = Table("Per access network: interface throughput per receiver (Mbit/s; n = samples) "
                                    "and share of the bytes", network_stats(f, ci), "Mbit/s")
    if f["tail_energy_j"].notna().any():
        # Records with an accounted tail: the transfer plus its tail, beside energy_j.
        b.frame = f = f.assign(energy_with_tail_j=f["energy_j"] + f["tail_energy_j"])
        t["case-energy-with-tail"] = Table("Energy per case including the tail after the transfer: per receiver "
                                           "(J; n = samples)", case_stats(f, "energy_with_tail_j", ci), "J")
    excluded = exclusion_summary(f)
    # A dataset's own build left records out before the report saw them: list those counts too.
    ds_rows = [{"source": s.name, "reason": f"{reason} (at the dataset's build)", "records": int(n)}
               for s in b.study.datasets for reason, n in (s.dataset.meta.get("excluded") or {}).items()]
    b.excluded = pd.concat([excluded, pd.DataFrame(ds_rows)], ignore_index=True) if ds_rows else excluded
    e = b.stats["energy_j"]
    b.labels = sorted(set(e.loc[e["n_samples"] > 0, "energy_label"])) or [None]
    b.policies = set(f["policy"].dropna())


def paper_tables(b: Build) -> None:
    """Tables 2-3 beside the paper, each in the paper's reading (Table 2 totals, Table 3 per node)."""
    fb = _file_bytes(b.study)
    thr = b.stats["throughput_total" if b.paper.how("throughput_mbit") == "total" else "throughput_mbit"]
    b.analog["throughput"] = analog_table(b.paper, thr, "throughput_mbit", fb)
    b.analog["energy"] = analog_table(b.paper, b.stats["energy_j"], "energy_j", fb)
    b.res.checks = checks_table(b.paper, b.analog["energy"], b.analog["throughput"])


def setup1_figures(b: Build) -> None:
    """Figs. 3-5 analogs: plain MPTCP per congestion control and mode."""
    items: list[Item] = []
    for tag, label, e, t, _ in b.per_label():
        if b.several_labels and not e["scheme"].isin(setup1.MODES).any():
            continue  # a label without Setup I cases (e.g. a Setup II campaign beside a Setup I one)
        items += [_tagged(x, tag, label) for x in (setup1.one_receiver(e, t, b.palette, b.figs_dir, b.ci_text),
                                                     setup1.receivers(e, t, b.palette, b.figs_dir, b.ci_text))]
    b.sections["setup1"] = items or [
        Skipped("setup1", "Setup I figures", "no Setup I cases (records with a mode and no policy)")]


def setup2_figures(b: Build) -> None:
    """The policies: IS vs IS + Tuning, policies against N, throughput-energy scatter."""
    items: list[Item] = []
    for tag, label, e, t, pol in b.per_label():
        if b.several_labels and not pol:
            continue  # a label without policies (e.g. a Setup I campaign beside a Setup II one)
        drawn = [setup2.is_vs_tuned(e, pol, b.palette, b.figs_dir, b.ci_text),
                 *setup2.policies_vs_receivers(e, t, pol, b.palette, b.figs_dir, b.ci_text),
                 setup2.scatter(_only(per_sample(b.frame, "energy_j"), label),
                                _only(per_sample(b.frame, "throughput_mbit"), label), e, t, pol, b.palette,
                                b.figs_dir, b.ci_text)]
        items += [_tagged(x, tag, label) for x in drawn]
    b.sections["setup2"] = items or [Skipped("setup2", "Setup II figures", setup2.NO_POLICIES)]


def schemes_side_by_side(b: Build) -> None:
    """Every policy beside the baselines and the related papers' headlines."""
    if not b.policies:
        b.sections["schemes"] = [Skipped("setup2-schemes", "Every policy side by side", setup2.NO_POLICIES)]
        return
    f = b.frame
    b.res.schemes = side_by_side(f, b.headlines, b.ci)
    b.res.headlines = headline_rows(f, b.headlines)
    b.tables["schemes"] = Table("Every policy side by side (numbers, per receiver)", b.res.schemes)
    b.tables["schemes-headlines"] = Table("The related papers' headlines beside mplab (numbers)", b.res.headlines)
    items: list[Item] = []
    for tag, label, e, t, pol in b.per_label():
        if b.several_labels and not pol:
            continue
        items.append(_tagged(setup2.schemes_by_receivers(
            _only(per_sample(f, "energy_j"), label), _only(per_sample(f, "throughput_mbit"), label),
            e, t, pol, b.palette, b.figs_dir, b.ci_text), tag, label))
    b.sections["schemes"] = items
    b.section_tables["schemes"] = _schemes_tables(b.res.schemes, b.res.headlines, b.headlines)


def _schemes_tables(schemes: pd.DataFrame, rows: pd.DataFrame, headlines: dict) -> list[dict]:
    out = []
    for (label, cc), view in summary_tables(schemes, headlines):
        out.append({"title": f"Summary, {cc}: {label}", "csv": "tables/schemes.csv",
                    "html": _mark_losses(html.table_html(view, left=True)), "markdown": markdown_table(view)})
    for (label, cc, n), view in display_tables(schemes):
        out.append({"title": f"{n} receivers, {cc}: {label}", "csv": "tables/schemes.csv",
                    "html": _mark_losses(html.table_html(view, left=True)), "markdown": markdown_table(view)})
    for (label, cc), view in display_headlines(rows):
        out.append({"title": f"The related papers' headlines beside mplab: {cc}, {label}",
                    "csv": "tables/schemes-headlines.csv", "html": html.table_html(view, left=True),
                    "markdown": markdown_table(view)})
    return out


def sample_closeup(b: Build) -> None:
    """One sample up close (the chosen one, or the first campaign's with raw output)."""
    f, camps = b.frame, b.study.campaigns
    if b.sample:
        owner = next((s for s in camps if b.sample in set(f.loc[f["campaign"] == s.name, "sample_id"])), None)
        if owner is None:
            raise ConfigError(f"sample {b.sample!r} is in none of the campaigns given", field="--sample")
        b.sections["sample"] = [sample_figs.closeup(f, owner, b.palette, b.figs_dir, b.sample)]
    elif camps:
        # The first campaign that has an ok sample with raw output (generated campaigns have none).
        b.sections["sample"] = [
            next((r for r in (sample_figs.closeup(f, c, b.palette, b.figs_dir) for c in camps)
                  if isinstance(r, Saved)), None)
            or Skipped(sample_figs.NAME, sample_figs.TITLE, "no campaign given has an ok sample with raw output")]
    else:
        b.sections["sample"] = [Skipped(sample_figs.NAME, sample_figs.TITLE,
                                        "no campaign given (datasets carry no raw output)")]


def dataset_and_model(b: Build) -> None:
    """Distributions per energy label; with --model, its test error beside the baselines it was scored with."""
    items: list[Item] = [_tagged(model_figs.distributions(_only(b.frame, label), b.palette, b.figs_dir), tag, label)
                         for tag, label, *_ in b.per_label()]
    if b.model is None:
        items.append(Skipped("model", "Model figures", "no --model given"))
        b.sections["model"] = items
        return
    model = Path(b.model)
    baselines = model_figs.baselines_table(model)
    if baselines is not None:
        b.tables["model-baselines"] = Table(
            f"The MLP beside the baselines, on the test split (per-receiver energy; n = {int(baselines['n'].max())} "
            "test records)", baselines)
        b.section_tables["model"] = [{"title": b.tables["model-baselines"].title, "csv": "tables/model-baselines.csv",
                                      "html": html.table_html(tables.plain_view(baselines), left=True)}]
    got = model_figs.model_test_rows(model, b.study.datasets)
    if isinstance(got, str):
        items.append(Skipped("model", "Model: predicted vs measured, error per case", got))
    else:
        test, where, label = got
        items.append(model_figs.predicted_vs_measured(test, where, model.name, b.palette, b.figs_dir, label))
        saved, per_case = model_figs.error_per_case(test, b.palette, b.figs_dir, label)
        items.append(saved)
        b.tables["model-error-per-case"] = Table("Model error per case on the test split (per receiver; "
                                                 "n = test records)", per_case)
    items.append(model_figs.training_curve(model, b.tracking_uri, b.figs_dir))
    b.sections["model"] = items


def rerun(b: Build) -> None:
    """Two campaigns of one scenario: what changed beyond noise, and what differs in their manifests."""
    pair = compare.find_rerun(b.study.campaigns)
    if pair is None:
        return
    cases = compare.compare_cases(b.frame, pair)
    diff = compare.manifest_diff(pair)
    b.res.rerun, b.res.rerun_manifests = cases, diff
    b.res.rerun_summary = compare.summary_line(cases, diff, pair)
    b.tables["rerun-cases"] = Table(f"Rerun: {pair.b.name} (B) against {pair.a.name} (A), per case", cases)
    b.tables["rerun-manifests"] = Table("Rerun: what differs in the manifests", diff)
    b.section_tables["rerun"] = [
        {"title": f"{title}: {label}" if label else title, "csv": "tables/rerun-cases.csv",
         "html": _mark_drift(html.table_html(view, left=True))}
        for label, d in tables.by_label(cases) for title, view in [("Per case: B - A", compare.cases_view(d))]
    ] + [{"title": "Manifests: every field that differs, and the key fields", "csv": "tables/rerun-manifests.csv",
          "html": html.table_html(compare.manifest_view(diff, pair), left=True, breakable=True)}]


def write_tables(b: Build) -> None:
    """Every table as CSV (raw columns, for programs)."""
    b.tables["paper-table2-throughput"] = Table(_analog_title(b.paper, "throughput_mbit"), b.analog["throughput"])
    b.tables["paper-table3-energy"] = Table(_analog_title(b.paper, "energy_j"), b.analog["energy"])
    b.tables["checks"] = Table("Reproduction checks", b.res.checks)
    b.tables["excluded"] = Table("Records left out, by reason", b.excluded)
    for key, t in b.tables.items():
        p = b.out / "tables" / f"{key}.csv"
        t.data.to_csv(p, index=False)
        b.res.tables[key] = p


def page(b: Build) -> None:
    """index.html, schemes.md and report.json."""
    items = [i for k in ("setup1", "setup2", "schemes", "sample", "model") for i in b.sections.get(k, [])]
    b.res.figures = [i for i in items if isinstance(i, Saved)]
    b.res.skipped = [i for i in items if isinstance(i, Skipped)]
    ctx = context(b)
    (b.out / "index.html").write_text(html.render(ctx))
    if b.section_tables.get("schemes"):
        b.res.markdown = b.out / "schemes.md"
        b.res.markdown.write_text(schemes_markdown(ctx, b.section_tables["schemes"],
                                                   [x for x in b.sections["schemes"] if isinstance(x, Saved)], b.out))
    (b.out / "report.json").write_text(json.dumps(report_json(b, ctx), indent=2, default=str) + "\n")


SECTIONS: tuple[tuple[str, Callable[[Build], None]], ...] = (
    ("read sources", read_sources), ("statistics", statistics), ("paper tables and checks", paper_tables),
    ("Setup I figures", setup1_figures), ("Setup II figures", setup2_figures),
    ("schemes side by side", schemes_side_by_side), ("sample close-up", sample_closeup),
    ("dataset and model figures", dataset_and_model), ("rerun comparison", rerun), ("tables (CSV)", write_tables),
    ("page", page))
STEPS = tuple(name for name, _ in SECTIONS)


def build_report(inputs: list[Path], out: Path, *, model: Path | None = None, tracking_uri: str | None = None,
                 sample: str | None = None, ci: str = "t", paper_file: Path = PAPER_FILE,
                 headlines_file: Path = HEADLINES_FILE, force: bool = False,
                 progress: Progress | None = None, title: str | None = None) -> ReportResult:
    """Build the report of ``inputs`` (campaign and dataset directories) in ``out``.

    Args:
        inputs: ``runs/<campaign>`` and/or ``datasets/<name>`` directories; two campaigns of one
            scenario are also compared as a rerun.
        out: ``reports/<name>``; replaced only with ``force`` and only if it holds a report.
        model: ``models/<name>`` for the model figures (predictions on its dataset's test split).
        tracking_uri: MLflow store of the model's run (default ``$MLFLOW_TRACKING_URI``, else ./mlflow.db).
        sample: sample id for the close-up (default: one is chosen; see ``figures.sample.pick_sample``).
        ci: ``t`` or ``bootstrap``.
        headlines_file: the related papers' headlines (``harness/data/paper/related-schemes.yaml``).
    """
    t0 = time.monotonic()
    if ci not in CI_METHODS:
        raise ConfigError(f"unknown interval method {ci!r}; use one of {', '.join(CI_METHODS)}", field="--ci")
    if model is not None and not (Path(model) / "model.json").exists():
        raise ConfigError(f"{model} is not an exported model (no model.json)", field="--model")
    b = Build(list(inputs), out, model, tracking_uri, sample, ci, title, paper_file, headlines_file, ReportResult(out))
    for i, (name, section) in enumerate(SECTIONS):
        if progress:
            progress(name, i, len(SECTIONS))
        if name == "statistics":
            _prepare_out(out, force)  # after the sources read: a bad input leaves the old report as it was
        b.res.seconds = time.monotonic() - t0
        section(b)
    b.res.seconds = time.monotonic() - t0
    return b.res


def _analog_title(paper: PaperTables, metric: str) -> str:
    if metric == "throughput_mbit":
        what = ("network total, the sum over a sample's N receivers" if paper.how(metric) == "total"
                else "per receiver")
        return f"Table 2 analog: throughput (Mbit/s, {what}; n = samples)"
    return "Table 3 analog: energy (J per receiver, the mean over a sample's receivers; n = samples)"


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


def _mark_losses(table: str) -> str:
    """Make every "loses to" in a rendered table stand out (the text was escaped before)."""
    return (table.replace("loses to", '<b class="lose">loses to</b>')
            .replace("<td>loses", '<td><b class="lose">loses</b>').replace("/ loses", '/ <b class="lose">loses</b>'))




def _mark_drift(table: str) -> str:
    """Make every drift verdict stand out (the text was escaped before)."""
    return table.replace("<td>drift</td>", '<td><b class="lose">drift</b></td>')
