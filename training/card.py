"""The model card: ``models/<name>/card.md``, rendered from model.json.

Like a Hugging Face model card: YAML front matter (license, tags, datasets, task, metrics in
``model-index`` form, the reference paper's citation), then Markdown for people. It says plainly
when a baseline beats the MLP, and what would help.
"""
from __future__ import annotations

import yaml

from harness.dataset.card import reference_citation


def _row(cells: list[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _r2(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def _s(s: dict) -> str:
    return f"{s['mae_j']:.3g} / {s['mape_pct']:.3g} % / {_r2(s['r2'])}"


def front_matter(doc: dict) -> dict:
    """The card's YAML header, in the Hugging Face model card vocabulary."""
    p = doc["provenance"]
    o = doc["metrics"]["overall"]["mlp"]
    cite = reference_citation()
    return {
        "license": p.get("license") or "unknown",
        "library_name": "onnx",
        "pipeline_tag": "tabular-regression",
        "tags": ["mptcp", "energy", "wifi", "lte", "mplab", *p["energy_sources"]],
        "datasets": [p["dataset"]],
        "metrics": ["mae", "mape", "r_squared"],
        "model-index": [{"name": doc["name"], "results": [{
            "task": {"type": "tabular-regression", "name": "receiver energy per transfer (J)"},
            "dataset": {"name": p["dataset"], "type": p["dataset"], "split": "test",
                        "revision": p["dataset_digest"]},
            "metrics": [{"type": "mae", "value": round(o["mae_j"], 6), "name": "MAE (J)"},
                        {"type": "mape", "value": round(o["mape_pct"], 4), "name": "MAPE (%)"},
                        {"type": "r_squared", "value": None if o["r2"] is None else round(o["r2"], 6)}]}]}],
        **({"citation": cite} if cite else {}),
    }


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


def render_model_card(doc: dict) -> str:
    """Markdown with YAML front matter: what the model predicts, from what data, how well (beside baselines), limits."""
    p = doc["provenance"]
    t = doc["training"]
    a = doc["architecture"]
    m = doc["metrics"]
    names = list(m["overall"])
    head = "---\n" + yaml.safe_dump(front_matter(doc), sort_keys=False, allow_unicode=True) + "---\n\n"
    campaigns = ", ".join(f"`{c}`" for c in p.get("campaigns", [])) or "-"
    out = [f"# Model card: `{doc['name']}`", "",
           f"Predicts {doc['task']}. Built {doc['created_at']} by mplab {doc['software']['mplab']}.", "",
           *verdict(doc), "",
           "## Data", "",
           f"- dataset `{p['dataset']}`, digest `{p['dataset_digest']}`; campaign(s): {campaigns}",
           f"- rows: {p['rows_fit']} fit + {p['rows_val']} validation (both from the train split), "
           f"{p['rows_test']} test; samples per case: {'/'.join(map(str, p.get('train_samples_per_case', [])))} "
           f"train, {'/'.join(map(str, p.get('test_samples_per_case', [])))} test",
           f"- testbed: {', '.join(p['testbed_kinds'])}; energy: {', '.join(p['energy_sources'])}; "
           f"file size(s): {', '.join(str(b) for b in p['file_bytes'])} bytes",
           f"- target: {p.get('energy', 'energy_j over the transfer window')}", "",
           "## Model", "",
           f"- MLP, {a['hidden']} hidden layers x {a['width']} ReLU units, linear output (the reference paper's "
           "architecture); input and output standardisation inside the model and the ONNX graph",
           f"- features (in order; also in the ONNX file's `metadata_props` as `mplab.features`): "
           f"{', '.join(f'`{n}`' for n in doc['features']['order'])}",
           f"- Adam, lr {t['lr']}, batch {t['batch_size']}, weight decay {t['weight_decay']}; early stopping "
           f"(patience {t['patience']} epochs, at least {t['patience_min_steps']} steps) on {t['val_fraction']:.0%} "
           f"of the training samples; seed {t['seed']}",
           f"- kept: epoch {t['best_epoch']} of {t['epochs_run']} (the best validation loss), {t['seconds']} s; "
           f"training matmuls in {t['precision_used']} (weights and the exported model are float32)",
           f"- ONNX Runtime vs PyTorch: max |diff| {doc.get('onnx_check', {}).get('max_abs_diff_j', 'n/a')} J", "",
           "## Test split (MAE J / MAPE / R2)", "",
           _row(["predictor", "MAE J", "MAPE %", "R2"]), _row(["---"] * 4)]
    for n in names:
        s = m["overall"][n]
        out.append(_row([n, f"{s['mae_j']:.4g}", f"{s['mape_pct']:.3g}", _r2(s["r2"], ".4f")]))
    out += ["", "`mean`: the training mean; `linear`: linear regression; `gbt`: gradient-boosted trees; "
            "all on the same features and training rows.", "", "### Per case (MAE J / MAPE / R2)", "",
            "R2 is given only for cases with at least 10 test rows: over fewer rows of one case it measures "
            "noise, not fit.", "",
            _row(["cc", "receivers", "mode", "n", *names]), _row(["---"] * (4 + len(names)))]
    for c in m["per_case"]:
        out.append(_row([c["cc"], c["n_receivers"], c["mode"], c[names[0]]["n"], *[_s(c[n]) for n in names]]))
    out += ["", "## Intended use and limits", "",
            "- Energy of one receiver for one transfer of the dataset's file size, given its case and measured "
            "per-interface throughput; controllers compare candidate interface sets with it.",
            "- Not valid for other file sizes, congestion controls not in the training data, or another testbed.",
            "- Emulated data: energy comes from a power profile, not radios; it tests the pipeline, not phones."
            if "emulated" in p["energy_sources"] else "- Measured with USB meters on the lab testbed."
            if "measured" in p["energy_sources"] else "- Synthetic data: it tests the pipeline only.", ""]
    cite = reference_citation()
    if cite:
        out += ["## Reference", "", cite["text"], ""]
    return head + "\n".join(out)
