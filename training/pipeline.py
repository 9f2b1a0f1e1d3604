"""`mplab train` end to end: dataset -> fit -> evaluate -> export -> MLflow."""
from __future__ import annotations

import platform
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import sklearn
import torch

import harness
from harness.dataset.build import Dataset, load_dataset
from harness.errors import ConfigError, MplabError
from training.card import render_model_card
from training.evaluate import evaluate, fit_baselines
from training.export import save_onnx, save_pt, write_json
from training.features import FeatureSpec, target
from training.fit import FitResult, TrainConfig, fit, predict, validation_mask
from training.runtime import MODEL_SCHEMA_VERSION, OnnxEnergyModel
from training.tracking import DEFAULT_EXPERIMENT, tracked_run

ONNX_TOLERANCE = 1e-5  # |onnx - torch| <= atol + rtol * |torch|, with atol = rtol = this


class ExportMismatch(MplabError):
    """The exported ONNX model does not reproduce the PyTorch model."""


@dataclass
class TrainOutcome:
    path: Path
    metrics: dict
    fit: FitResult
    onnx_max_abs_diff_j: float
    run_id: str | None


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


def train(dataset_dir: Path, out: Path, cfg: TrainConfig = TrainConfig(), *, track: bool = True,
          experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None, force: bool = False,
          log=print) -> TrainOutcome:
    """Train on ``dataset_dir``'s train split, evaluate on its test split, export to ``out``.

    Args:
        dataset_dir: ``datasets/<name>`` (checked against its digest and schema).
        out: ``models/<name>``; refused if it holds a model, unless ``force``.
        cfg: hyper-parameters.
        track: log the run to MLflow (``tracking_uri`` or the default store).
    """
    if (out / "model.json").exists() and not force:
        raise ConfigError(f"{out} already holds a model; choose another name or pass --force")
    ds = load_dataset(dataset_dir)
    train_df, test_df = ds.part("train"), ds.part("test")
    if test_df.empty:
        raise ConfigError(f"{dataset_dir}: the test split is empty (every case has fewer than 2 samples)")
    spec = FeatureSpec.fit(train_df)
    x_train, y_train = spec.matrix(train_df), target(train_df)
    x_test, y_test = spec.matrix(test_df), target(test_df)
    val = validation_mask(train_df, cfg.val_fraction, cfg.seed)
    if not track:
        return _run(ds, out, cfg, spec, x_train, y_train, val, test_df, x_test, y_test, None, log)
    with tracked_run(experiment, run_name=out.name, tracking_uri=tracking_uri) as run:
        return _run(ds, out, cfg, spec, x_train, y_train, val, test_df, x_test, y_test, run, log)


def _run(ds: Dataset, out: Path, cfg: TrainConfig, spec: FeatureSpec, x_train, y_train, val, test_df, x_test,
         y_test, run, log) -> TrainOutcome:
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    provenance = {"dataset": ds.meta["name"], "dataset_digest": ds.digest, "dataset_path": str(ds.path),
                  "rows_fit": int((~val).sum()), "rows_val": int(val.sum()), "rows_test": len(x_test),
                  "testbed_kinds": sorted(set(ds.frame["testbed_kind"])),
                  "energy_sources": sorted(set(ds.frame["energy_source"])),
                  # What the target means (the radio tail in or out); older datasets did not say.
                  "energy": ds.meta.get("energy", "energy_j over the transfer window (tails not separated)"),
                  "file_bytes": sorted({int(b) for b in ds.frame["bytes"]})}
    if run:
        run.log_params({**{f"train.{k}": v for k, v in asdict(cfg).items()},
                        "features": ",".join(spec.names), "dataset_digest": ds.digest,
                        "dataset": ds.meta["name"], "rows_fit": provenance["rows_fit"],
                        "rows_val": provenance["rows_val"], "rows_test": provenance["rows_test"]})
        run.set_tags({"mplab.dataset_digest": ds.digest, "mplab.version": harness.__version__,
                      "mplab.testbed_kinds": ",".join(provenance["testbed_kinds"]),
                      "mplab.energy_sources": ",".join(provenance["energy_sources"])})

    def on_epoch(st) -> None:
        if run:
            run.log_metrics({"train_loss": st.train_loss, "val_loss": st.val_loss, "val_mae_j": st.val_mae_j},
                            step=st.epoch)

    log(f"training on {provenance['rows_fit']} rows (validation {provenance['rows_val']}, "
        f"test {provenance['rows_test']}), {len(spec.names)} features")
    res = fit(x_train[~val], y_train[~val], x_train[val], y_train[val], cfg, on_epoch)
    log(f"best epoch {res.best_epoch} of {len(res.history)} ({'early stop' if res.stopped_early else 'max epochs'}), "
        f"{res.seconds:.1f} s")
    predictors = {"mlp": lambda a: predict(res.model, a), **fit_baselines(x_train, y_train, cfg.seed)}
    metrics = evaluate(test_df, x_test, y_test, predictors)

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    save_onnx(res.model, out / "model.onnx", harness.__version__)
    save_pt(res.model, out / "model.pt", spec.to_dict())
    doc = {
        "schema_version": MODEL_SCHEMA_VERSION,
        "name": out.name,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "task": "energy (J) of one receiver's transfer, from its case and per-interface throughput",
        "input": {"name": "features", "dtype": "float32", "shape": ["n", len(spec.names)]},
        "output": {"name": "energy_j", "dtype": "float32", "shape": ["n", 1], "unit": "J"},
        "features": spec.to_dict(),
        "scaler": {"x_mean": res.model.x_mean.tolist(), "x_scale": res.model.x_scale.tolist(),
                   "y_mean": res.model.y_mean.tolist(), "y_scale": res.model.y_scale.tolist(),
                   "fitted_on": "fit part of the train split", "inside_onnx": True},
        "architecture": {**asdict(res.model.arch), "activation": "relu", "output": "linear"},
        "training": {**asdict(cfg), "precision_used": res.precision, "best_epoch": res.best_epoch,
                     "epochs_run": len(res.history),
                     "stopped_early": res.stopped_early, "seconds": round(res.seconds, 3),
                     "optimizer": "adam", "loss": "mse on standardised energy"},
        "provenance": provenance,
        "metrics": metrics,
        "software": {"mplab": harness.__version__, "torch": torch.__version__, "onnx": onnx.__version__,
                     "onnxruntime": onnxruntime.__version__, "scikit-learn": sklearn.__version__,
                     "python": platform.python_version()},
    }
    write_json(out / "model.json", doc)
    diff = check_onnx(out, res.model, np.concatenate([x_train, x_test]))
    doc["onnx_check"] = {"max_abs_diff_j": diff, "rows": len(x_train) + len(x_test), "tolerance": ONNX_TOLERANCE}
    write_json(out / "model.json", doc)
    write_json(out / "metrics.json", metrics)
    with open(out / "history.csv", "w") as f:
        f.write("epoch,train_loss,val_loss,val_mae_j\n")
        for st in res.history:
            f.write(f"{st.epoch},{st.train_loss:.8g},{st.val_loss:.8g},{st.val_mae_j:.8g}\n")
    (out / "card.md").write_text(render_model_card(doc))
    run_id = None
    if run:
        o = metrics["overall"]
        run.log_metrics({f"test_{k}_{name}": v for name, s in o.items() for k, v in s.items() if k != "n"},
                        step=len(res.history))
        run.log_metrics({"best_epoch": res.best_epoch, "onnx_max_abs_diff_j": diff, "fit_seconds": res.seconds})
        run.flush()
        run.log_artifacts(out, "model")
        run_id = run.run_id
    return TrainOutcome(out, metrics, res, diff, run_id)
