"""`mplab train DATASET -o models/<name>` and `mplab models list|promote|pull`.

Mounted on the `mplab` app by ``mplab.cli``; errors are ``MplabError`` (usage errors exit 2).
Nothing heavy is imported at module level: `mplab --help` and the sweep commands must work on a
lab install without the training stack (PyTorch, MLflow, scikit-learn).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from mplab.commands.dataset import Force, KeepPrevious, TrackingUri

console = Console()
models_app = typer.Typer(no_args_is_help=True, help="Registered models: list, promote, pull (MLflow Model Registry).")


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def check_train_args(dataset: Path, out: Path, *, epochs: int, patience: int, batch_size: int, lr: float,
                     val_fraction: float, precision: str, seed: int) -> None:
    """``ConfigError`` (exit 2) naming the argument for anything `mplab train` would refuse later: checked
    without importing the training stack (``TrainConfig`` checks the same values again)."""
    import math

    from harness.errors import ConfigError

    if not dataset.is_dir():
        raise ConfigError(f"{dataset}: {'not a directory' if dataset.exists() else 'not found'}; give a dataset "
                          "directory (datasets/<name>, from `mplab dataset build`)", field="DATASET")
    if not (dataset / "dataset.json").is_file():
        raise ConfigError(f"{dataset} is not a dataset (no dataset.json); build one with `mplab dataset build`",
                          field="DATASET")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file, not a model directory", field="--out")
    checks = (("--epochs", epochs, epochs >= 1, "at least 1"), ("--patience", patience, patience >= 1, "at least 1"),
              ("--batch-size", batch_size, batch_size >= 1, "at least 1"),
              ("--lr", lr, math.isfinite(lr) and 0 < lr <= 10, "a finite number in (0, 10]"),
              ("--val-fraction", val_fraction, math.isfinite(val_fraction) and 0 < val_fraction < 1,
               "a fraction strictly between 0 and 1"),
              ("--seed", seed, 0 <= seed < 2**32, "in 0..2^32-1"))
    for name, value, ok, want in checks:
        if not ok:
            raise ConfigError(f"{value!r} is not valid: must be {want}", field=name)
    if precision not in ("fp32", "bf16", "auto"):
        raise ConfigError(f"{precision!r} is not a precision: fp32, bf16 or auto", field="--precision")


def train(
    dataset: Annotated[Path, typer.Argument(help="dataset directory (datasets/<name>)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="model directory (models/<name>)")],
    epochs: Annotated[int, typer.Option(help="maximum epochs")] = 500,
    patience: Annotated[int, typer.Option(
        help="epochs without validation improvement before stopping (at least 100 steps)")] = 10,
    batch_size: Annotated[int, typer.Option(help="minibatch size")] = 1024,
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 5e-3,
    val_fraction: Annotated[float, typer.Option(help="share of training samples held out for early stopping")] = 0.2,
    seed: Annotated[int, typer.Option(help="seed for weights, validation part and batch order")] = 2023,
    experiment: Annotated[str, typer.Option(help="MLflow experiment")] = "mplab-energy",
    tracking_uri: TrackingUri = None,
    precision: Annotated[str, typer.Option(
        help="training matmuls: fp32, bf16, or auto (bf16 where the CPU has it natively)")] = "fp32",
    track: Annotated[bool, typer.Option("--track/--no-track", help="log the run to MLflow")] = True,
    register: Annotated[str | None, typer.Option(
        help="also register the model under this name (a new version in the MLflow Model Registry)")] = None,
    run_name: Annotated[str | None, typer.Option(help="MLflow run name (default: model <- campaign)")] = None,
    force: Force = False,
    keep_previous: KeepPrevious = False,
) -> None:
    """Train the 5 x 200 ReLU MLP on a dataset, compare it with baselines, export ONNX for controllers."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.artifacts import FolderPolicy, check_output
    from harness.errors import missing_extra
    from harness.tables import table

    policy = FolderPolicy.from_flags(force, keep_previous)
    # Every argument before the training stack loads (PyTorch: seconds and ~900 MB just to say a value is wrong).
    check_train_args(dataset, out, epochs=epochs, patience=patience, batch_size=batch_size, lr=lr,
                     val_fraction=val_fraction, precision=precision, seed=seed)
    check_output(out, "model.json", policy, "model")
    try:
        from training.fit import TrainConfig
        from training.pipeline import train as run_train
    except ImportError as exc:  # a lab install without the `train` dependency group
        raise missing_extra("train", "`mplab train`", exc.name) from None

    cfg = TrainConfig(epochs=epochs, patience=patience, batch_size=batch_size, lr=lr, val_fraction=val_fraction,
                      seed=seed, precision=precision)
    progress = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TextColumn("epochs"),
                        TextColumn("val loss {task.fields[val]}"), TimeElapsedColumn(), console=console,
                        transient=True)
    task = progress.add_task("train", total=epochs, val="-")

    def on_epoch(st) -> None:  # EpochStats
        progress.update(task, completed=st.epoch, val=f"{st.val_loss:.4g}")

    console.print(f"loading {dataset} and the training stack...")
    t0 = time.monotonic()
    with progress:
        res = run_train(dataset, out, cfg, track=track, experiment=experiment, tracking_uri=tracking_uri,
                        policy=policy, register=register, run_name=run_name, log=console.print, on_epoch=on_epoch)
    console.print(table(("predictor", "MAE J", "MAPE %", "R2"),
                        ((name, f"{s['mae_j']:.4g}", f"{s['mape_pct']:.3g}", _fmt(s["r2"], ".4f"))
                         for name, s in res.metrics["overall"].items()),
                        title=f"test split of {dataset.name}", right=("MAE J", "MAPE %", "R2")))
    o = res.metrics["overall"]
    best = min(o, key=lambda k: o[k]["mape_pct"])
    if best != "mlp":
        console.print(f"[yellow]the {best} baseline beats the MLP on this dataset (MAPE {o[best]['mape_pct']:.3g} % vs "
                      f"{o['mlp']['mape_pct']:.3g} %); see {out}/card.md[/yellow]")
    console.print(f"model: {out}/ (model.onnx, ONNX vs PyTorch max |diff| {res.onnx_max_abs_diff_j:.2g} J; model.json, "
                  f"card.md, SHA256SUMS) in {time.monotonic() - t0:.1f} s")
    if res.previous:
        console.print(f"previous model kept as {res.previous}")
    if res.run_id:
        local = not (res.run_url or "").startswith("http") or res.run_url.startswith("http://127.0.0.1:5000/")
        console.print(f"MLflow run {res.run_id} (experiment {experiment}), logged model {res.model_id}")
        # soft_wrap: a URL broken over lines cannot be clicked or copied
        console.print(f"  {res.run_url}" + (" (after `make mlflow-ui`)" if local else ""), soft_wrap=True)
    if res.registered:
        console.print(f"registered {res.registered[0]} version {res.registered[1]}; promote it with "
                      f"`mplab models promote {res.registered[0]} {res.registered[1]} --alias champion`")


@models_app.command("list")
def list_cmd(tracking_uri: TrackingUri = None) -> None:
    """Registered models, their versions and aliases."""
    from harness.tables import table, utc_minute
    from training.registry import list_models

    rows = list_models(tracking_uri)
    if not rows:
        console.print("no registered models (register one with `mplab train ... --register NAME`)")
        return
    console.print(table(("name", "version", "aliases", "created (UTC)", "dataset digest", "description"),
                        ((r["name"], r["version"], ", ".join(r["aliases"]), utc_minute(r["created_ms"]),
                          (r["dataset_digest"] or "-")[:19], r["description"][:80]) for r in rows)))


def check_promote_args(version: str, alias: str, tracking_uri: str | None) -> None:
    """``ConfigError`` (exit 2) before MLflow opens (and, for a SQLite store, creates) its database: a version
    that is not a number, an alias MLflow refuses, or a SQLite store that does not exist (nothing registered)."""
    import re

    from harness.errors import ConfigError
    from harness.mlflow_store import default_tracking_uri

    if not version.isdigit() or int(version) < 1:
        raise ConfigError(f"{version!r} is not a version number (1, 2, ...; see `mplab models list`)", field="VERSION")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", alias) or re.fullmatch(r"[vV]\d+|latest", alias):
        raise ConfigError(f"{alias!r} is not an alias: letters, digits, '_' or '-', not v<N> or latest",
                          field="--alias")
    uri = tracking_uri or default_tracking_uri()
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.exists():
            raise ConfigError(f"no MLflow store at {db}: nothing is registered there (register a model with "
                              "`mplab train ... --register NAME`, or pass --tracking-uri)", field="--tracking-uri")


@models_app.command("promote")
def promote_cmd(
    name: Annotated[str, typer.Argument(help="registered model name")],
    version: Annotated[str, typer.Argument(help="version number")],
    alias: Annotated[str, typer.Option(help="alias to point at this version")] = "champion",
    tracking_uri: TrackingUri = None,
) -> None:
    """Point an alias (default: champion) at a version; `models:/NAME@alias` then resolves to it."""
    check_promote_args(version, alias, tracking_uri)
    from training.registry import promote

    promote(name, version, alias, tracking_uri)
    console.print(f"{name}@{alias} -> version {version} (models:/{name}@{alias})")


@models_app.command("pull")
def pull_cmd(
    ref: Annotated[str, typer.Argument(help="NAME@alias, NAME/VERSION, or NAME (the latest version)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="model directory to write (models/<name>)")],
    tracking_uri: TrackingUri = None,
    force: Force = False,
    keep_previous: KeepPrevious = False,
) -> None:
    """Write a registered version as the folder `mplab train` writes, every file checked against SHA256SUMS."""
    from harness.artifacts import FolderPolicy
    from training.registry import pull

    res = pull(ref, out, tracking_uri, FolderPolicy.from_flags(force, keep_previous))
    console.print(f"{res.name} version {res.version} -> {res.path} (checksums verified, manifest {res.sums_digest})")
    if res.previous:
        console.print(f"previous model kept as {res.previous}")


def register(app: typer.Typer) -> None:
    """Mount `mplab train` and `mplab models ...` on the top-level app."""
    app.command()(train)
    app.add_typer(models_app, name="models")
