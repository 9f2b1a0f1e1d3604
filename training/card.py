"""The model card: ``models/<name>/card.md``, rendered from model.json with ``huggingface_hub``'s ModelCard.

The card data (``ModelCardData``: license, library, task, tags, datasets, metrics, and the test
scores as ``EvalResult`` entries, which the Hub shows as ``model-index``) is built from model.json;
``ModelCard.from_template`` renders it above the Markdown body of ``card_template.md``. The card
says plainly when a baseline beats the MLP, and what would help; it cites the reference paper
from ``harness/data/paper/citations.yaml``.
"""
from __future__ import annotations


from harness import citations
from harness.resources import package_path

TEMPLATE = package_path("training", "card_template.md")


def _r2(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def _s(s: dict) -> str:
    return f"{s['mae_j']:.3g} / {s['mape_pct']:.3g} % / {_r2(s['r2'])}"


def eval_results(doc: dict) -> list:
    """The MLP's test scores as ``EvalResult`` entries (MAE, MAPE, and R2 when defined)."""
    from huggingface_hub import EvalResult

    p = doc["provenance"]
    o = doc["metrics"]["overall"]["mlp"]
    metrics = [("mae", "MAE (J)", round(o["mae_j"], 6)), ("mape", "MAPE (%)", round(o["mape_pct"], 4))]
    if o["r2"] is not None:
        metrics.append(("r_squared", "R2", round(o["r2"], 6)))
    return [EvalResult(task_type="tabular-regression", task_name="receiver energy per transfer (J)",
                       dataset_type=p["dataset"], dataset_name=p["dataset"], dataset_split="test",
                       dataset_revision=p["dataset_digest"], metric_type=kind, metric_name=label, metric_value=value)
            for kind, label, value in metrics]


def card_data(doc: dict):  # huggingface_hub is imported lazily
    """The card's metadata as ``ModelCardData``."""
    from huggingface_hub import ModelCardData

    p = doc["provenance"]
    return ModelCardData(license=p.get("license") or "unknown", library_name="onnx", pipeline_tag="tabular-regression",
                         tags=["mptcp", "energy", "wifi", "lte", "mplab", *p["energy_sources"]],
                         datasets=[p["dataset"]], metrics=["mae", "mape", "r_squared"], model_name=doc["name"],
                         eval_results=eval_results(doc))


def verdict(doc: dict) -> list[str]:
    """Plain words on how the MLP compares with the baselines, and what would help."""
    o = doc["metrics"]["overall"]
    p = doc["provenance"]
    mlp = o["mlp"]["mape_pct"]
    better = sorted((k for k in o if k != "mlp" and o[k]["mape_pct"] < mlp), key=lambda k: o[k]["mape_pct"])
    per_case = p.get("train_samples_per_case") or []
    few = f"{min(per_case)}" + (f"-{max(per_case)}" if per_case and max(per_case) != min(per_case) else "") \
        if per_case else "?"
    if not better:
        return [f"The MLP has the lowest test MAPE ({mlp:.3g} %) of the predictors compared here."]
    names = ", ".join(f"{k} ({o[k]['mape_pct']:.3g} %)" for k in better)
    return [f"**A simpler baseline beats the MLP on this dataset**: {names} against the MLP's {mlp:.3g} % test MAPE. "
            f"Use the better baseline's numbers as the reference for this data, not the MLP's.",
            "",
            f"What would help: more samples per case. This dataset has {few} training sample(s) per case; the "
            "reference paper trains on 30 per case (45 with the test samples). A 5 x 200 MLP has about 160,000 "
            "weights and needs many samples to beat a linear fit of a nearly linear power model."]


def _data_note(sources: list[str]) -> str:
    if "emulated" in sources:
        return "Emulated data: energy comes from a power profile, not radios; it tests the pipeline, not phones."
    if "measured" in sources:
        return "Measured with USB meters on the lab testbed."
    return "Synthetic data: it tests the pipeline only."


def card_context(doc: dict) -> dict:
    """What the Markdown body shows, as values for ``card_template.md``."""
    p, t, m = doc["provenance"], doc["training"], doc["metrics"]
    names = list(m["overall"])
    return {
        "name": doc["name"], "task": doc["task"], "created_at": doc["created_at"],
        "mplab_version": doc["software"]["mplab"], "verdict": "\n".join(verdict(doc)), "p": p, "t": t,
        "a": doc["architecture"], "campaigns": ", ".join(f"`{c}`" for c in p.get("campaigns", [])) or "-",
        "train_per_case": "/".join(map(str, p.get("train_samples_per_case", []))),
        "test_per_case": "/".join(map(str, p.get("test_samples_per_case", []))),
        "file_sizes": ", ".join(str(b) for b in p["file_bytes"]),
        "target": p.get("energy", "energy_j over the transfer window"),
        "features": ", ".join(f"`{n}`" for n in doc["features"]["order"]), "val_pct": f"{t['val_fraction']:.0%}",
        "onnx_diff": doc.get("onnx_check", {}).get("max_abs_diff_j", "n/a"),
        "overall": [[n, f"{s['mae_j']:.4g}", f"{s['mape_pct']:.3g}", _r2(s["r2"], ".4f")]
                    for n, s in m["overall"].items()],
        "predictors": names,
        "per_case": [[c["cc"], c["n_receivers"], c["mode"], c[names[0]]["n"], *[_s(c[n]) for n in names]]
                     for c in m["per_case"]],
        "model_ref": f"models/{doc['name']}", "data_note": _data_note(p["energy_sources"]),
        "reference": citations.reference(),
    }


def render_model_card(doc: dict) -> str:
    """card.md: ``ModelCard.from_template`` over the card data and ``card_template.md``."""
    from huggingface_hub import ModelCard

    return str(ModelCard.from_template(card_data(doc), template_path=str(TEMPLATE), **card_context(doc)))
