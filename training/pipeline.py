"""`mplab train` end to end: dataset -> fit -> evaluate -> export -> MLflow (and the registry).

Four steps, one function each: ``prepare`` (dataset -> matrices), ``fit_and_evaluate``,
``export`` (``models/<name>/``: what controllers read), ``log_to_mlflow`` (the run's summary,
its dataset input and the ONNX model in MLflow's ONNX flavour, optionally registered).
"""
from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pandas as pd
import sklearn
import torch

import harness
from harness.artifacts import FolderPolicy, check_output, staged_folder, write_sums
from harness.dataset.build import Dataset, load_dataset
from harness.errors import ConfigError, MplabError
from training.card import render_model_card
from training.evaluate import evaluate, fit_baselines
from training.export import save_onnx, save_pt, write_json
from training.features import FeatureSpec, target
from training.fit import EpochStats, FitResult, TrainConfig, fit, predict, validation_mask
from training.runtime import INPUT_NAME, MODEL_SCHEMA_VERSION, OUTPUT_NAME, OnnxEnergyModel
from training.tracking import DEFAULT_EXPERIMENT, TrainingRun, training_run, ui_url

ONNX_TOLERANCE = 1e-5  # |onnx - torch| <= atol + rtol * |torch|, with atol = rtol = this


class ExportMismatch(MplabError):
    """The exported ONNX model does not reproduce the PyTorch model."""


@dataclass(frozen=True)
class Prepared:
    """A dataset turned into what the fit needs: features, target, validation part, test rows."""

    ds: Dataset
    spec: FeatureSpec
    train_df: pd.DataFrame
    test_df: pd.DataFrame
    x_train: np.ndarray
    y_train: np.ndarray
    val: np.ndarray  # bool mask over the train split: rows held out for early stopping
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def campaigns(self) -> list[str]:
        return [s["campaign"] for s in self.ds.meta.get("sources", [])]

    def provenance(self) -> dict:
        f = self.ds.frame
        cases = self.ds.meta.get("cases", [])
        return {"dataset": self.ds.meta["name"], "dataset_digest": self.ds.digest, "dataset_path": str(self.ds.path),
                "dataset_registry": self.ds.meta.get("registry"), "campaigns": self.campaigns,
                "license": self.ds.meta.get("license"),
                "rows_fit": int((~self.val).sum()), "rows_val": int(self.val.sum()), "rows_test": len(self.x_test),
                "train_samples_per_case": sorted({c["train_samples"] for c in cases}),
                "test_samples_per_case": sorted({c["test_samples"] for c in cases}),
                "testbed_kinds": sorted(set(f["testbed_kind"])), "energy_sources": sorted(set(f["energy_source"])),
                # What the target means (the radio tail in or out); older datasets did not say.
                "energy": self.ds.meta.get("energy", "energy_j over the transfer window (tails not separated)"),
                "file_bytes": sorted({int(b) for b in f["bytes"]})}


@dataclass
class Trained:
    fit: FitResult
    metrics: dict


@dataclass
class TrainOutcome:
    path: Path
    metrics: dict
    fit: FitResult
    onnx_max_abs_diff_j: float
    run_id: str | None = None
    run_url: str | None = None  # the run's page in the MLflow UI
    model_id: str | None = None  # MLflow's logged model
    registered: tuple[str, str] | None = None  # (name, version) when --register was given
    previous: Path | None = None  # where the old model folder went (--keep-previous)


def prepare(dataset_dir: Path, cfg: TrainConfig) -> Prepared:
    """Load and check the dataset; build feature matrices with categories from the train split."""
    ds = load_dataset(dataset_dir)
    train_df, test_df = ds.part("train"), ds.part("test")
    if test_df.empty:
        raise ConfigError(f"{dataset_dir}: the test split is empty (every case has fewer than 2 samples)")
    spec = FeatureSpec.fit(train_df)
    return Prepared(ds, spec, train_df, test_df, spec.matrix(train_df), target(train_df),
                    validation_mask(train_df, cfg.val_fraction, cfg.seed), spec.matrix(test_df), target(test_df))


def fit_and_evaluate(p: Prepared, cfg: TrainConfig, on_epoch: Callable[[EpochStats], None] | None = None
                     ) -> Trained:
    """Fit the MLP on the fit part (early stopping on the validation part); score it and the baselines."""
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    res = fit(p.x_train[~p.val], p.y_train[~p.val], p.x_train[p.val], p.y_train[p.val], cfg, on_epoch)
    predictors = {"mlp": lambda a: predict(res.model, a), **fit_baselines(p.x_train, p.y_train, cfg.seed)}
    return Trained(res, evaluate(p.test_df, p.x_test, p.y_test, predictors))


def check_onnx(model_dir: Path, model: torch.nn.Module, x: np.ndarray) -> float:
    """Largest |ONNX Runtime - PyTorch| over ``x``; raises ``ExportMismatch`` beyond the tolerance."""
    ort_model = OnnxEnergyModel.load(model_dir)
    got = ort_model.predict_matrix(x)
    want = predict(model, x)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    if not np.all(diff <= ONNX_TOLERANCE * (1 + np.abs(want))):
        raise ExportMismatch(f"{model_dir / 'model.onnx'}: ONNX Runtime differs from PyTorch by up to "
                             f"{diff.max():.3g} J (tolerance {ONNX_TOLERANCE} absolute + relative)")
    return float(diff.max()) if len(diff) else 0.0


def model_doc(name: str, p: Prepared, cfg: TrainConfig, t: Trained) -> dict:
    """``model.json``: everything a controller and a reader need about the model."""
    res = t.fit
    best = res.history[res.best_epoch - 1] if res.best_epoch else None
    return {
        "schema_version": MODEL_SCHEMA_VERSION,
        "name": name,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "task": "energy (J) of one receiver's transfer, from its case and per-interface throughput",
        "input": {"name": INPUT_NAME, "dtype": "float32", "shape": ["n", len(p.spec.names)]},
        "output": {"name": OUTPUT_NAME, "dtype": "float32", "shape": ["n", 1], "unit": "J"},
        "features": p.spec.to_dict(),
        "scaler": {"x_mean": res.model.x_mean.tolist(), "x_scale": res.model.x_scale.tolist(),
                   "y_mean": res.model.y_mean.tolist(), "y_scale": res.model.y_scale.tolist(),
                   "fitted_on": "fit part of the train split", "inside_onnx": True},
        "architecture": {**asdict(res.model.arch), "activation": "relu", "output": "linear"},
        "training": {**asdict(cfg), "precision_used": res.precision, "best_epoch": res.best_epoch,
                     "epochs_run": len(res.history), "stopped_early": res.stopped_early,
                     "seconds": round(res.seconds, 3), "optimizer": "adam", "loss": "mse on standardised energy",
                     "kept": {"train_loss": best.train_loss, "val_loss": best.val_loss, "val_mae_j": best.val_mae_j}
                     if best else None},
        "provenance": p.provenance(),
        "metrics": t.metrics,
        "software": {"mplab": harness.__version__, "torch": torch.__version__, "onnx": onnx.__version__,
                     "onnxruntime": onnxruntime.__version__, "scikit-learn": sklearn.__version__,
                     "python": platform.python_version()},
    }


def export(folder: Path, name: str, p: Prepared, cfg: TrainConfig, t: Trained) -> tuple[dict, float]:
    """Write the model folder (ONNX, pt, json, card, metrics, history, SHA256SUMS); returns model.json and the ONNX check."""
    res = t.fit
    save_onnx(res.model, folder / "model.onnx", harness.__version__, p.spec.names)
    save_pt(res.model, folder / "model.pt", p.spec.to_dict())
    doc = model_doc(name, p, cfg, t)
    write_json(folder / "model.json", doc)
    diff = check_onnx(folder, res.model, np.concatenate([p.x_train, p.x_test]))
    doc["onnx_check"] = {"max_abs_diff_j": diff, "rows": len(p.x_train) + len(p.x_test), "tolerance": ONNX_TOLERANCE}
    write_json(folder / "model.json", doc)
    write_json(folder / "metrics.json", t.metrics)
    with open(folder / "history.csv", "w") as f:
        f.write("epoch,train_loss,val_loss,val_mae_j\n")
        for st in res.history:
            f.write(f"{st.epoch},{st.train_loss:.8g},{st.val_loss:.8g},{st.val_mae_j:.8g}\n")
    (folder / "card.md").write_text(render_model_card(doc))
    write_sums(folder)
    return doc, diff


def default_run_name(out: Path, p: Prepared) -> str:
    """``<model> <- <campaign>[ +N more]``: tells runs of different campaigns apart in the UI."""
    c = p.campaigns
    src = c[0] if c else p.ds.meta["name"]
    return f"{out.name} <- {src}" + (f" +{len(c) - 1} more" if len(c) > 1 else "")


def train(dataset_dir: Path, out: Path, cfg: TrainConfig = TrainConfig(), *, track: bool = True,
          experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None,
          policy: str = FolderPolicy.REFUSE, register: str | None = None, run_name: str | None = None,
          log: Callable[..., None] = print, on_epoch: Callable[[EpochStats], None] | None = None) -> TrainOutcome:
    """Train on ``dataset_dir``'s train split, evaluate on its test split, export to ``out``.

    Args:
        dataset_dir: ``datasets/<name>`` (checked against its digest, checksums and schema).
        out: ``models/<name>``; an existing model there is refused, set aside or replaced (``policy``).
        cfg: hyper-parameters.
        track: log the run to MLflow (``tracking_uri`` or the default store).
        register: also create a version of this registered model (needs ``track``).
        run_name: the MLflow run name (default: model and source campaigns).
        on_epoch: called after every epoch (progress display).
    """
    if register and not track:
        raise ConfigError("--register needs tracking (drop --no-track)", field="--register")
    check_output(out, "model.json", policy, "model")
    p = prepare(dataset_dir, cfg)
    log(f"training on {int((~p.val).sum())} rows (validation {int(p.val.sum())}, test {len(p.x_test)}), "
        f"{len(p.spec.names)} features")
    with staged_folder(out, policy) as (folder, previous):
        if not track:
            t = fit_and_evaluate(p, cfg, on_epoch)
            _, diff = export(folder, out.name, p, cfg, t)
            outcome = TrainOutcome(out, t.metrics, t.fit, diff)
        else:
            with training_run(experiment, run_name or default_run_name(out, p), tracking_uri,
                              tags=_run_tags(p), description=_run_description(out, p)) as run:
                _log_inputs(run, p, cfg)

                def epoch(st: EpochStats) -> None:
                    run.log_metrics({"epoch_train_loss": st.train_loss, "epoch_val_loss": st.val_loss,
                                     "epoch_val_mae_j": st.val_mae_j}, step=st.epoch)
                    if on_epoch:
                        on_epoch(st)

                t = fit_and_evaluate(p, cfg, epoch)
                doc, diff = export(folder, out.name, p, cfg, t)
                outcome = TrainOutcome(out, t.metrics, t.fit, diff, run.run_id,
                                       ui_url(run.client.tracking_uri, run.experiment_id, run.run_id))
                outcome.model_id, outcome.registered = log_to_mlflow(run, folder, p, t, doc, register)
    outcome.previous = previous[0] if previous else None
    res = outcome.fit
    log(f"best epoch {res.best_epoch} of {len(res.history)} ({'early stop' if res.stopped_early else 'max epochs'}), "
        f"{res.seconds:.1f} s")
    return outcome


def _run_tags(p: Prepared) -> dict[str, str]:
    prov = p.provenance()
    return {"mplab.dataset": p.ds.meta["name"], "mplab.dataset_digest": p.ds.digest,
            "mplab.campaigns": ",".join(p.campaigns)[:4000], "mplab.version": harness.__version__,
            "mplab.testbed_kinds": ",".join(prov["testbed_kinds"]),
            "mplab.energy_sources": ",".join(prov["energy_sources"])}


def _run_description(out: Path, p: Prepared) -> str:
    return (f"`mplab train` of `{out.name}` on dataset `{p.ds.meta['name']}` ({p.ds.digest[:19]}), "
            f"campaign(s): {', '.join(p.campaigns) or '-'}. The model is the best epoch's (early stopping); "
            "the run's `train_loss`/`val_loss`/`val_mae_j` are that epoch's, `epoch_*` are the curves.")


def _log_inputs(run: TrainingRun, p: Prepared, cfg: TrainConfig) -> None:
    """Parameters and the dataset input, before the fit (the UI shows them while it runs)."""
    import mlflow

    prov = p.provenance()
    run.log_params({**{f"train.{k}": v for k, v in asdict(cfg).items()},
                    "features": ",".join(p.spec.names), "dataset": p.ds.meta["name"],
                    "dataset_digest": p.ds.digest, "rows_fit": prov["rows_fit"], "rows_val": prov["rows_val"],
                    "rows_test": prov["rows_test"]})
    mlflow.log_input(mlflow_dataset(p.ds), context="training",
                     tags={"mplab.digest": p.ds.digest, "mplab.campaigns": ",".join(p.campaigns)[:480],
                           "mplab.splits": "train (fit + validation), test"})


def mlflow_dataset(ds: Dataset):
    """The dataset as an ``mlflow.data`` dataset: name, mplab's digest (shortened), source, schema, profile."""
    import mlflow
    import mlflow.data

    from harness.mlflow_store import dataset_source

    reg = ds.meta.get("registry") or {}
    source = dataset_source(reg["uri"], mlflow.get_tracking_uri()) if reg.get("uri") else str(ds.path.resolve())
    # NB: MLflow's dataset digest column holds 36 characters; the full sha256 is in the input's tags.
    return mlflow.data.from_pandas(ds.frame, source=source, targets="energy_j", name=ds.meta["name"],
                                   digest=ds.digest.removeprefix("sha256:")[:32])


def log_to_mlflow(run: TrainingRun, folder: Path, p: Prepared, t: Trained, doc: dict,
                  register: str | None) -> tuple[str, tuple[str, str] | None]:
    """Summary metrics of the kept model, and the model in MLflow's ONNX flavour (mplab's folder inside).

    Returns the logged model's id and, with ``register``, (name, version).
    """
    import mlflow
    import mlflow.onnx
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from training.registry import SUMS_TAG, tag_version

    res = t.fit
    kept = doc["training"]["kept"] or {}
    run.log_metrics({"train_loss": kept.get("train_loss", float("nan")), "val_loss": kept.get("val_loss", float("nan")),
                     "val_mae_j": kept.get("val_mae_j", float("nan"))}, step=res.best_epoch)
    o = t.metrics["overall"]
    test = {f"test_{k}_{name}": v for name, s in o.items() for k, v in s.items() if k != "n" and v is not None}
    run.log_metrics({**test, "best_epoch": res.best_epoch, "epochs_run": len(res.history),
                     "onnx_max_abs_diff_j": doc["onnx_check"]["max_abs_diff_j"], "fit_seconds": res.seconds},
                    step=res.best_epoch)
    run.flush()
    n = len(p.spec.names)
    signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.float32), (-1, n), INPUT_NAME)]),
                               outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, 1), OUTPUT_NAME)]))
    sums = (folder / "SHA256SUMS").read_bytes()
    from harness.artifacts import manifest_digest

    info = mlflow.onnx.log_model(
        onnx.load(folder / "model.onnx"), name="model", signature=signature,
        input_example={INPUT_NAME: np.ascontiguousarray(p.x_test[:3], dtype=np.float32)},
        onnx_execution_providers=["CPUExecutionProvider"],
        # The requirements are known; inferring them starts a subprocess that loads the model.
        pip_requirements=[f"onnx=={onnx.__version__}", f"onnxruntime=={onnxruntime.__version__}"],
        extra_files=[str(folder / f) for f in sorted(x.name for x in folder.iterdir())],
        metadata={"mplab_features": p.spec.names, "mplab_output_unit": "J",
                  "mplab_dataset_digest": p.ds.digest},
        tags={SUMS_TAG: manifest_digest(sums), "mplab.dataset_digest": p.ds.digest},
        step=res.best_epoch)
    # Test scores belong to the model too (shown on its page), against the dataset they came from.
    mlflow.log_metrics(test, step=res.best_epoch, model_id=info.model_id, dataset=mlflow_dataset(p.ds))
    registered = None
    if register:
        mv = mlflow.register_model(f"models:/{info.model_id}", register,
                                   tags={SUMS_TAG: manifest_digest(sums), "mplab.dataset_digest": p.ds.digest})
        tag_version(register, mv.version, doc, mlflow.get_tracking_uri())
        registered = (register, str(mv.version))
    return info.model_id, registered
