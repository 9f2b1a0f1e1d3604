"""`mplab dataset build|publish|pull|list`: campaign records -> datasets/<name>/, and their published versions.

Mounted on the `mplab` app by ``mplab.cli``; errors are ``MplabError`` (usage errors exit 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()
app = typer.Typer(no_args_is_help=True, help="Build datasets from campaigns; publish and pull them by name and version.")

TrackingUri = Annotated[str | None, typer.Option(
    "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")]
#: The two flags of every command that writes a folder at --out (``FolderPolicy.from_flags``).
Force = Annotated[bool, typer.Option(help="replace an existing folder at --out")]
KeepPrevious = Annotated[bool, typer.Option(
    help="rename an existing folder at --out to <name>.<UTC time> instead of refusing")]


@app.command("build")
def build(
    runs: Annotated[list[Path], typer.Argument(help="campaign directories (runs/<campaign>)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="dataset directory (datasets/<name>)")],
    train: Annotated[int, typer.Option(help="training samples per case")] = 30,
    test: Annotated[int, typer.Option(help="test samples per case")] = 15,
    seed: Annotated[int, typer.Option(help="seed of the per-case split")] = 2023,
    keep_flagged: Annotated[bool, typer.Option(help="keep records whose measurement was flagged")] = False,
    license: Annotated[str, typer.Option(help="license of the data (SPDX id), for the card and croissant.json")
                       ] = "unknown",
    force: Force = False,
    keep_previous: KeepPrevious = False,
    allow_mixed: Annotated[bool, typer.Option(help="merge campaigns of different testbeds, power profiles or "
                                                   "energy sources (the card lists the mix)")] = False,
    version: Annotated[str | None, typer.Option(
        "--version", help="the dataset's version, MAJOR.MINOR.PATCH (default: 1.0.0 for a new folder; over an "
                          "existing one the same rows keep its version, other rows bump the minor)")] = None,
    url: Annotated[str | None, typer.Option(
        help="where the dataset lives, for the card and croissant.json (default: the folder's file:// URI)")] = None,
    skip_damaged: Annotated[bool, typer.Option(help="leave out records that fail their checksum or the plan "
                                                    "(default: refuse, naming the line)")] = False,
) -> None:
    """One row per receiver per sample, validated, split per case, with a card, Croissant metadata and checksums."""
    from harness.artifacts import FolderPolicy
    from harness.campaign.store import check_campaigns
    from harness.errors import ConfigError

    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file, not a dataset directory", field="--out")
    check_campaigns(runs)  # a damaged campaign is refused (4) before pandas and pyarrow load
    from harness.dataset.build import SplitSpec, build_dataset  # pandas/pyarrow only when building

    res = build_dataset(runs, out, SplitSpec(train=train, test=test, seed=seed), keep_flagged,
                        policy=FolderPolicy.from_flags(force, keep_previous), license=license,
                        allow_mixed=allow_mixed, version=version, url=url, skip_damaged=skip_damaged)
    sp = res.meta["splits"]
    console.print(f"dataset {res.path} version {res.meta['version']}: {res.rows} rows "
                  f"({sp['train']} train, {sp['test']} test) in "
                  f"{len(res.meta['cases'])} case(s); digest {res.digest}")
    if res.excluded:
        console.print("excluded: " + ", ".join(f"{k}: {v}" for k, v in sorted(res.excluded.items())))
    if res.previous:
        console.print(f"previous dataset kept as {res.previous}")
    console.print(f"card: {res.path / 'README.md'}")


@app.command("publish")
def publish_cmd(
    folder: Annotated[Path, typer.Argument(help="dataset directory (datasets/<name>)")],
    name: Annotated[str | None, typer.Option(help="published name (default: the folder's name)")] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Store a versioned, checksummed copy where the MLflow tracking server keeps artifacts."""
    from harness.dataset.registry import publish

    v, new = publish(folder, name, tracking_uri)
    if new:
        console.print(f"published {v.name}@{v.version} ({v.rows} rows, digest {v.digest}); "
                      f"pull it with `mplab dataset pull {v.name}@{v.version} -o datasets/{v.name}`")
    else:
        console.print(f"{folder} is already published as {v.name}@{v.version} (same files); nothing uploaded")


@app.command("pull")
def pull_cmd(
    ref: Annotated[str, typer.Argument(help="NAME (the latest version) or NAME@VERSION")],
    out: Annotated[Path, typer.Option("-o", "--out", help="dataset directory to write (datasets/<name>)")],
    tracking_uri: TrackingUri = None,
    force: Force = False,
    keep_previous: KeepPrevious = False,
) -> None:
    """Bring a published version back, every file checked against SHA256SUMS and the published digest."""
    from harness.artifacts import FolderPolicy
    from harness.dataset.registry import pull

    v = pull(ref, out, tracking_uri, FolderPolicy.from_flags(force, keep_previous))
    console.print(f"{v.name}@{v.version} -> {out} ({v.rows} rows, digest {v.digest}; checksums verified)")


@app.command("list")
def list_cmd(tracking_uri: TrackingUri = None) -> None:
    """Published datasets and their versions."""
    from harness.dataset.registry import list_datasets
    from harness.tables import table, utc_minute

    rows = list_datasets(tracking_uri)
    if not rows:
        console.print("no published datasets (publish one with `mplab dataset publish datasets/NAME`)")
        return
    console.print(table(("name", "version", "rows", "digest", "published (UTC)"),
                        ((v.name, str(v.version), str(v.rows or "-"), v.digest[:23], utc_minute(v.created_ms))
                         for v in rows)))


def register(root: typer.Typer) -> None:
    """Mount `mplab dataset ...` on the top-level app."""
    root.add_typer(app, name="dataset")
