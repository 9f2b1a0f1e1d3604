"""`mplab train DATASET -o models/<name>`: fit, evaluate, export, track.

Mounted on the `mplab` app by ``mplab.cli``; errors are ``MplabError`` (usage errors exit 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

console = Console()


def train(
    dataset: Annotated[Path, typer.Argument(help="dataset directory (datasets/<name>)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="model directory (models/<name>)")],
    epochs: Annotated[int, typer.Option(help="maximum epochs")] = 500,
    patience: Annotated[int, typer.Option(help="epochs without validation improvement before stopping (at least 100 steps)")] = 10,
    batch_size: Annotated[int, typer.Option(help="minibatch size")] = 1024,
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 5e-3,
    val_fraction: Annotated[float, typer.Option(help="share of training samples held out for early stopping")] = 0.2,
    seed: Annotated[int, typer.Option(help="seed for weights, validation part and batch order")] = 2023,
    experiment: Annotated[str, typer.Option(help="MLflow experiment")] = "mplab-energy",
    tracking_uri: Annotated[Optional[str], typer.Option(
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")] = None,
    precision: Annotated[str, typer.Option(help="training matmuls: auto (bf16 where the CPU has it), bf16, fp32")
                         ] = "auto",
    no_track: Annotated[bool, typer.Option("--no-track", help="do not log to MLflow")] = False,
    force: Annotated[bool, typer.Option(help="overwrite an existing model directory")] = False,
) -> None:
    """Train the 5 x 200 ReLU MLP on a dataset, compare it with baselines, export ONNX for controllers."""
    from training.fit import TrainConfig
    from training.pipeline import train as run_train

    cfg = TrainConfig(epochs=epochs, patience=patience, batch_size=batch_size, lr=lr, val_fraction=val_fraction,
                      seed=seed, precision=precision)
    res = run_train(dataset, out, cfg, track=not no_track, experiment=experiment, tracking_uri=tracking_uri,
                    force=force, log=console.print)
    t = Table(title=f"test split of {dataset.name}")
    for col in ("predictor", "MAE J", "MAPE %", "R2"):
        t.add_column(col, justify="left" if col == "predictor" else "right")
    for name, s in res.metrics["overall"].items():
        t.add_row(name, f"{s['mae_j']:.4g}", f"{s['mape_pct']:.3g}", f"{s['r2']:.4f}")
    console.print(t)
    console.print(f"model: {out}/model.onnx (ONNX vs PyTorch max |diff| {res.onnx_max_abs_diff_j:.2g} J), "
                  f"model.pt, model.json, card.md")
    if res.run_id:
        console.print(f"MLflow run {res.run_id} (experiment {experiment})")


def register(app: typer.Typer) -> None:
    """Mount `mplab train` on the top-level app."""
    app.command()(train)
