"""`mplab report RUNS_OR_DATASETS... -o reports/<name>`: figures, tables beside the paper, one HTML page.

Mounted on the `mplab` app by ``mplab.cli``; errors are ``MplabError`` (bad input exits 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)


def report(
    inputs: Annotated[list[Path], typer.Argument(help="campaign (runs/<id>) and/or dataset (datasets/<name>) "
                                                      "directories", metavar="RUNS_OR_DATASETS...")],
    out: Annotated[Path, typer.Option("-o", "--out", help="report directory (reports/<name>)")],
    model: Annotated[str | None, typer.Option(
        help="exported model for the model figures: a folder (models/<name>) or models:/NAME@alias")] = None,
    tracking_uri: Annotated[str | None, typer.Option(
        help="MLflow store of the model's run (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")] = None,
    sample: Annotated[str | None, typer.Option(help="sample id for the close-up (default: one is chosen)")] = None,
    ci: Annotated[str, typer.Option(help="interval method: t (Student t) or bootstrap")] = "t",
    title: Annotated[str | None, typer.Option(help="page title")] = None,
    headlines: Annotated[Path | None, typer.Option(
        help="the related papers' headlines (default: harness/data/paper/related-schemes.yaml)")] = None,
    force: Annotated[bool, typer.Option(help="replace an existing report in --out")] = False,
) -> None:
    """Figures, Tables 2-3 beside the reference paper with reproduction checks, and a self-contained HTML page.

    Two campaigns of the same scenario (RUN_A RUN_B) are also compared: per case, B - A with its
    interval, drift flagged, and what differs in their manifests.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.campaign.store import check_campaigns, is_campaign_dir
    from harness.errors import ConfigError

    # Arguments and stores before pandas and matplotlib load (seconds and ~200 MB): a damaged campaign is 4.
    if ci not in ("t", "bootstrap"):
        raise ConfigError(f"unknown interval method {ci!r}; use one of t, bootstrap", field="--ci")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file, not a report directory", field="--out")
    seen: set[Path] = set()
    for p in inputs:
        if not is_campaign_dir(p) and not (p / "dataset.json").exists():
            raise ConfigError(f"{p} is neither a campaign (manifest.json) nor a dataset (dataset.json)",
                              field="RUNS_OR_DATASETS")
        if p.resolve() in seen:
            raise ConfigError(f"{p} is given twice", field="RUNS_OR_DATASETS")
        seen.add(p.resolve())
    check_campaigns(inputs)
    from analysis.headlines import HEADLINES_FILE
    from analysis.report import STEPS, build_report
    from harness.model_registry import resolve_model

    folder = resolve_model(model, tracking_uri) if model is not None else None  # models:/... -> a verified copy

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("report", total=len(STEPS))

        def progress(step: str, i: int, n: int) -> None:
            prog.update(task, completed=i, description=step)

        res = build_report(inputs, out, model=folder, tracking_uri=tracking_uri, sample=sample, ci=ci, force=force,
                           progress=progress, title=title, headlines_file=headlines or HEADLINES_FILE)
        prog.update(task, completed=len(STEPS))
    c = Console()
    for row in (res.checks.to_dict("records") if res.checks is not None else []):
        style = {"pass": "green", "fail": "red"}.get(row["status"], "dim")
        c.print(f"[{style}]{row['status']:>4}[/] {row['check']}: {row['detail']}  (paper: {row['paper_status']})")
    for s in res.skipped:
        c.print(f"[dim]not drawn: {s.title}: {s.reason}[/]")
    if res.schemes is not None and len(res.schemes):
        t = res.schemes
        lose = t["verdict_all_both"].eq("loses") | t["verdict_best_single"].eq("loses")
        sure = (t["verdict_all_both"].eq("loses") & t["verdict_all_both_text"].str.contains("beyond noise")) | (
            t["verdict_best_single"].eq("loses") & t["verdict_best_single_text"].str.contains("beyond noise"))
        c.print(f"schemes side by side: {len(t)} policy case(s), {int(lose.sum())} losing to a baseline on the mean "
                f"({int(sure.sum())} beyond noise): {res.markdown}")
    if res.rerun is not None:
        _print_rerun(c, res)
    c.print(f"{len(res.figures)} figure(s), {len(res.tables)} table(s) in {res.seconds:.1f} s: {out / 'index.html'}")


def _print_rerun(c: Console, res) -> None:
    """Two campaigns of one scenario: every case that drifted (B - A, its interval) and the manifest differences."""
    from analysis.tables import interval_text, sig3

    c.print(res.rerun_summary)
    for r in res.rerun[res.rerun["verdict"] == "drift"].itertuples():
        c.print(f"[red]drift[/] {r.cc} N={r.n_receivers} {r.scheme}, {r.measure}: A {sig3(r.mean_a)} (n={r.n_a}), "
                f"B {sig3(r.mean_b)} (n={r.n_b}), B - A {sig3(r.diff)} {r.unit} {interval_text(r.diff_low, r.diff_high)} "
                f"({r.change_pct:+.1f} %)")
    rest = res.rerun[res.rerun["verdict"] != "drift"]["verdict"].value_counts()
    if len(rest):
        c.print("[dim]" + ", ".join(f"{n} {v}" for v, n in rest.items()) + " (tables/rerun-cases.csv)[/]")
    diff = res.rerun_manifests
    for r in diff[diff["differs"] == "yes"].itertuples():
        c.print(f"[yellow]manifest differs[/] {r.field}: A {r.a[:70]} | B {r.b[:70]}")


def register(app: typer.Typer) -> None:
    """Mount `mplab report` on the top-level app."""
    app.command()(report)
