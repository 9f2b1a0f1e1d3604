"""Dataset and model figures: distributions, predicted vs measured, error per case, the training curve.

Predictions come from the exported model (``models/<name>/model.onnx`` through
``training.runtime.OnnxEnergyModel``, the reader controllers use; no PyTorch) on the **test
split** of the dataset the model was trained on: the dataset given to the report whose digest
matches ``model.json``, else the model's recorded ``dataset_path`` if it still matches. The
training curve is read from the model's MLflow run (the newest run of the model's experiment
with the model's name and dataset digest) when the tracking store is reachable; an unreachable
store is never created as a side effect, and the figure is then skipped with the reason.
"""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figures.common import legend_outside
from harness.modelfile import read_model_json
from analysis.load import Source, dataset_energy_label
from analysis.stats import usable
from analysis.style import Palette, Saved, Skipped, label_energy, marker, order_ccs, order_schemes, save

MODES = ("wifi", "lte", "both")


def distributions(frame: pd.DataFrame, palette: Palette, out: Path) -> Saved | Skipped:
    """Box plots of per-record energy and throughput per mode or policy (usable records only)."""
    name, title = "dataset-distributions", "Energy and throughput distributions per mode/policy"
    f = frame[usable(frame, "energy_j") & frame["throughput_mbit"].notna()]
    if f.empty:
        return Skipped(name, title, "no usable records")
    schemes = order_schemes(set(f["scheme"]))
    fig, axes = plt.subplots(1, 2, figsize=(max(7, 1.1 * len(schemes) * 2 + 2), 3.6))
    for ax, col, ylabel in ((axes[0], "energy_j", "energy per receiver and transfer (J)"),
                            (axes[1], "throughput_mbit", "throughput per receiver (Mbit/s)")):
        data = [f.loc[f["scheme"] == s, col].to_numpy() for s in schemes]
        bp = ax.boxplot(data, tick_labels=schemes, patch_artist=True, widths=0.6, showfliers=True,
                        flierprops={"markersize": 2})
        for patch, s in zip(bp["boxes"], schemes):
            patch.set_facecolor(palette.colour(s))
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        ax.set_ylabel(ylabel)
        ax.set_xlabel("mode / policy")
    label_energy(fig, f["energy_label"])
    sizes = sorted({int(b) for b in f["file_bytes"].dropna()})
    caption = (f"Every usable record (one receiver in one sample; {len(f)} records), all receiver counts and "
               f"congestion controls pooled; file size(s): {', '.join(f'{b / 2**20:.3g} MiB' for b in sizes) or '?'}. "
               "Boxes: quartiles; whiskers: 1.5 IQR.")
    return save(fig, out, name, title, caption, shows_energy=True)


def model_test_rows(model_dir: Path, datasets: list[Source]) -> tuple[pd.DataFrame, str, str] | str:
    """The test split of the model's dataset with ``predicted_j`` added, where it came from and its energy
    label; or why not."""
    meta = read_model_json(model_dir)
    digest = (meta.get("provenance") or {}).get("dataset_digest")
    ds = next((s.dataset for s in datasets if s.dataset is not None and s.dataset.digest == digest), None)
    where = "a dataset given to the report"
    if ds is None:
        path = (meta.get("provenance") or {}).get("dataset_path")
        if path and (Path(path) / "dataset.json").exists():
            from harness.dataset.build import load_dataset

            cand = load_dataset(path)
            if cand.digest == digest:
                ds, where = cand, f"{path} (recorded in model.json)"
    if ds is None:
        return (f"the model's dataset (digest {str(digest)[:19]}...) is neither given to the report nor at its "
                "recorded path; pass its datasets/<name> directory")
    test = ds.part("test")
    if test.empty:
        return f"the test split of {ds.path} is empty"
    from training.runtime import OnnxEnergyModel

    model = OnnxEnergyModel.load(model_dir)
    pred = model.predict(test.to_dict("records"))
    return (test.assign(predicted_j=np.asarray(pred, dtype=float)), f"test split of {ds.path.name} ({where})",
            dataset_energy_label(ds))


#: Predictors ``mplab train`` scores beside the MLP (training/evaluate.py), in words.
PREDICTORS = {"mlp": "MLP (5 x 200, the exported model)", "mean": "mean of the training energies",
              "linear": "linear regression", "gbt": "gradient-boosted trees"}


def baselines_table(model_dir: Path) -> pd.DataFrame | None:
    """The MLP's test error beside the baselines it was scored with (``model.json`` metrics), best first.

    The row of every baseline that beats the MLP (lower MAPE) says so: the model section must not
    show the MLP alone when a simpler predictor does better on the same test split.
    """
    overall = ((read_model_json(model_dir).get("metrics") or {}).get("overall") or {})
    if "mlp" not in overall:
        return None
    mlp = overall["mlp"]["mape_pct"]
    rows = [{"predictor": PREDICTORS.get(k, k), "n": v.get("n"), "mae_j": v.get("mae_j"),
             "mape_pct": v.get("mape_pct"), "r2": v.get("r2"),
             "against the MLP": "—" if k == "mlp" else ("beats the MLP" if v["mape_pct"] < mlp else "worse")}
            for k, v in overall.items()]
    return pd.DataFrame(rows).sort_values("mape_pct", kind="stable").reset_index(drop=True)


def predicted_vs_measured(test: pd.DataFrame, where: str, model_name: str, palette: Palette, out: Path,
                          energy_label: str) -> Saved:
    name, title = "model-predicted-vs-measured", "Model: predicted vs measured energy on the test split"
    fig, ax = plt.subplots(figsize=(5.2, 4.8))
    for mode in order_schemes(set(test["mode"])):
        d = test[test["mode"] == mode]
        ax.scatter(d["energy_j"], d["predicted_j"], s=10, alpha=0.6, color=palette.colour(mode), label=mode,
                   linewidths=0)
    lo = float(min(test["energy_j"].min(), test["predicted_j"].min()))
    hi = float(max(test["energy_j"].max(), test["predicted_j"].max()))
    ax.plot([lo, hi], [lo, hi], color="#555555", lw=1, ls="--", label="predicted = measured")
    err = test["predicted_j"] - test["energy_j"]
    mae = float(err.abs().mean())
    mape = float((err.abs() / test["energy_j"].abs().clip(lower=1e-9)).mean() * 100)
    ax.set_xlabel("measured energy (J)")
    ax.set_ylabel("predicted energy (J)")
    ax.set_title(f"{model_name}: MAE {mae:.3g} J, MAPE {mape:.3g} % (n = {len(test)})")
    legend_outside(fig, ax, title="mode")
    label_energy(fig, [energy_label])
    caption = (f"Energy predicted by the exported model (ONNX) against the energy measured, on the {where}; "
               "one dot per receiver and sample, coloured by mode.")
    return save(fig, out, name, title, caption, shows_energy=True)


def error_per_case(test: pd.DataFrame, palette: Palette, out: Path, energy_label: str) -> tuple[Saved, pd.DataFrame]:
    """Mean absolute percentage error per case: x = receivers, colour = mode, marker = congestion control."""
    name, title = "model-error-per-case", "Model: error per case on the test split"
    t = test.assign(ape=(test["predicted_j"] - test["energy_j"]).abs() / test["energy_j"].abs().clip(lower=1e-9) * 100,
                    ae=(test["predicted_j"] - test["energy_j"]).abs())
    per_case = t.groupby(["case_id", "cc", "n_receivers", "mode"]).agg(
        n=("ape", "size"), mae_j=("ae", "mean"), mape_pct=("ape", "mean")).reset_index()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ccs = order_ccs(set(per_case["cc"]))
    offsets = {cc: (i - (len(ccs) - 1) / 2) * 0.08 for i, cc in enumerate(ccs)}
    for mode in order_schemes(set(per_case["mode"])):
        for cc in ccs:
            d = per_case[(per_case["mode"] == mode) & (per_case["cc"] == cc)]
            if not d.empty:
                ax.scatter(d["n_receivers"] + offsets[cc], d["mape_pct"], marker=marker(cc), s=28,
                           color=palette.colour(mode), label=f"{mode}, {cc}")
    ax.set_xlabel("receivers")
    ax.set_ylabel("mean absolute error (% of measured)")
    ax.set_xticks(sorted(set(per_case["n_receivers"])))
    ax.set_ylim(bottom=0)
    legend_outside(fig, ax, fontsize=6.5)
    label_energy(fig, [energy_label])
    caption = ("Mean absolute percentage error of the model on each case of the test split (colour: mode; marker: "
               "congestion control; nudged sideways per congestion control).")
    return save(fig, out, name, title, caption, shows_energy=True), per_case


def _mlflow_history(meta: dict, model_name: str, tracking_uri: str | None,
                    registered: tuple[str, str] | None = None) -> tuple[pd.DataFrame, str] | str:
    """(epoch, train_loss, val_loss) of the model's MLflow run, and the run it came from; or why not.

    The run is found by the model's name and dataset digest (a folder `mplab train` wrote), or, for a
    registered version (``registered``: name, version; a folder pulled by ``models:/NAME@alias``, whose
    folder name is its version), as the run the registry recorded for that version.
    """
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.exists():
            return f"MLflow store {uri} does not exist (not created by the report)"
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        digest = (meta.get("provenance") or {}).get("dataset_digest")
        exps = client.search_experiments()
        # `mplab train` names its runs "<model> <- <campaign>" (older runs: "<model>").
        runs = client.search_runs([e.experiment_id for e in exps],
                                  filter_string=f"tags.`mplab.dataset_digest` = '{digest}'",
                                  order_by=["attributes.start_time DESC"], max_results=200)
        runs = [r for r in runs if r.info.run_name == model_name or r.info.run_name.startswith(f"{model_name} <- ")]
        if not runs and registered is not None:
            try:
                mv = client.get_model_version(*registered)
            except Exception:  # noqa: BLE001 - not a registered version after all: the name search said why
                mv = None
            if mv is not None and mv.run_id:
                runs = [client.get_run(mv.run_id)]
        if not runs:
            return f"no MLflow run of model {model_name} with the model's dataset digest in {uri}"
        run = runs[0]
        cols = {}
        for key in ("train_loss", "val_loss"):
            # Per-epoch curves are `epoch_*`; `train_loss`/`val_loss` hold the kept epoch's value (older runs:
            # the curve itself).
            hist = client.get_metric_history(run.info.run_id, f"epoch_{key}") or \
                client.get_metric_history(run.info.run_id, key)
            cols[key] = pd.Series({m.step: m.value for m in hist}, dtype=float)
    except Exception as exc:  # noqa: BLE001 - best effort: any store or network failure skips the figure
        return f"MLflow store {uri} not reachable ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    df = pd.DataFrame(cols).sort_index()
    if df.empty:
        return f"MLflow run {run.info.run_id} has no train_loss/val_loss history"
    return df.rename_axis("epoch").reset_index(), f"MLflow run {run.info.run_id} ({uri})"


def training_curve(model_dir: Path, tracking_uri: str | None, out: Path) -> Saved | Skipped:
    name, title = "model-training-curve", "Model: training curve (from the MLflow run)"
    meta = read_model_json(model_dir)
    # A registered version resolved from models:/NAME@alias or models:/NAME/VERSION sits in <cache>/NAME/VERSION
    # (harness.model_registry.resolve_model): its folder name is the version, not the model's name.
    registered = (model_dir.parent.name, model_dir.name) if model_dir.name.isdigit() else None
    got = _mlflow_history(meta, model_dir.name, tracking_uri, registered)
    if isinstance(got, str):
        return Skipped(name, title, got)
    hist, where = got
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(hist["epoch"], hist["train_loss"], color="#1f6fb4", label="training loss")
    ax.plot(hist["epoch"], hist["val_loss"], color="#c62d3a", label="validation loss")
    best = (meta.get("training") or {}).get("best_epoch")
    if best is not None:
        ax.axvline(best, color="#555555", ls=":", lw=1, label=f"best epoch ({best})")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("MSE on standardised energy (log scale)")
    legend_outside(fig, ax)
    caption = f"Training and validation loss per epoch of {model_dir.name}, from {where}."
    return save(fig, out, name, title, caption, shows_energy=False)
