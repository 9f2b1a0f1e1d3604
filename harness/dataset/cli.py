"""`mplab dataset build`: campaign records -> datasets/<name>/.

Mounted on the `mplab` app by ``mplab.cli``; errors are ``MplabError`` (usage errors exit 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()
app = typer.Typer(no_args_is_help=True, help="Build datasets from campaigns.")


@app.command("build")
def build(
    runs: Annotated[list[Path], typer.Argument(help="campaign directories (runs/<campaign>)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="dataset directory (datasets/<name>)")],
    train: Annotated[int, typer.Option(help="training samples per case")] = 30,
    test: Annotated[int, typer.Option(help="test samples per case")] = 15,
    seed: Annotated[int, typer.Option(help="seed of the per-case split")] = 2023,
    keep_flagged: Annotated[bool, typer.Option(help="keep records whose measurement was flagged")] = False,
    force: Annotated[bool, typer.Option(help="overwrite an existing dataset")] = False,
    allow_mixed: Annotated[bool, typer.Option(help="merge campaigns of different testbeds, power profiles or "
                                                   "energy sources (the card lists the mix)")] = False,
) -> None:
    """One row per receiver per sample, validated, split per case, with a card and a digest."""
    from harness.dataset.build import SplitSpec, build_dataset  # pandas/pyarrow only when building

    res = build_dataset(runs, out, SplitSpec(train=train, test=test, seed=seed), keep_flagged, force,
                        allow_mixed)
    n_train = sum(c["train_rows"] for c in res.meta["cases"])
    console.print(f"dataset {res.path}: {res.rows} rows ({n_train} train, {res.rows - n_train} test) in "
                  f"{len(res.meta['cases'])} case(s); digest {res.digest}")
    if res.excluded:
        console.print("excluded: " + ", ".join(f"{k}: {v}" for k, v in sorted(res.excluded.items())))
    console.print(f"card: {res.path / 'README.md'}")


def register(root: typer.Typer) -> None:
    """Mount `mplab dataset ...` on the top-level app."""
    root.add_typer(app, name="dataset")
