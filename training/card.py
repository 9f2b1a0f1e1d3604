"""The model card: ``models/<name>/card.md``, rendered from model.json."""
from __future__ import annotations


def _row(cells: list[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _s(s: dict) -> str:
    return f"{s['mae_j']:.3g} / {s['mape_pct']:.3g} % / {s['r2']:.3f}"


def render_model_card(doc: dict) -> str:
    """Markdown: what the model predicts, from what data, how well (beside baselines), and its limits."""
    p = doc["provenance"]
    t = doc["training"]
    a = doc["architecture"]
    m = doc["metrics"]
    names = list(m["overall"])
    out = [f"# Model card: `{doc['name']}`", "",
           f"Predicts {doc['task']}. Built {doc['created_at']} by mplab {doc['software']['mplab']}.", "",
           "## Data", "",
           f"- dataset `{p['dataset']}`, digest `{p['dataset_digest']}`",
           f"- rows: {p['rows_fit']} fit + {p['rows_val']} validation (both from the train split), "
           f"{p['rows_test']} test",
           f"- testbed: {', '.join(p['testbed_kinds'])}; energy: {', '.join(p['energy_sources'])}; "
           f"file size(s): {', '.join(str(b) for b in p['file_bytes'])} bytes",
           f"- target: {p.get('energy', 'energy_j over the transfer window')}", "",
           "## Model", "",
           f"- MLP, {a['hidden']} hidden layers x {a['width']} ReLU units, linear output (the reference paper's "
           "architecture); input and output standardisation inside the model and the ONNX graph",
           f"- features (in order): {', '.join(f'`{n}`' for n in doc['features']['order'])}",
           f"- Adam, lr {t['lr']}, batch {t['batch_size']}, weight decay {t['weight_decay']}; early stopping "
           f"(patience {t['patience']} epochs, at least {t['patience_min_steps']} steps) on {t['val_fraction']:.0%} of the training samples; seed {t['seed']}",
           f"- best epoch {t['best_epoch']} of {t['epochs_run']}, {t['seconds']} s; training matmuls in "
           f"{t['precision_used']} (weights and the exported model are float32)",
           f"- ONNX Runtime vs PyTorch: max |diff| {doc.get('onnx_check', {}).get('max_abs_diff_j', 'n/a')} J", "",
           "## Test split (MAE J / MAPE / R2)", "",
           _row(["predictor", "MAE J", "MAPE %", "R2"]), _row(["---"] * 4)]
    for n in names:
        s = m["overall"][n]
        out.append(_row([n, f"{s['mae_j']:.4g}", f"{s['mape_pct']:.3g}", f"{s['r2']:.4f}"]))
    out += ["", "`mean`: the training mean; `linear`: linear regression; `gbt`: gradient-boosted trees; "
            "all on the same features and training rows.", "", "### Per case (MAE J / MAPE / R2)", "",
            _row(["cc", "receivers", "mode", "n", *names]), _row(["---"] * (4 + len(names)))]
    for c in m["per_case"]:
        out.append(_row([c["cc"], c["n_receivers"], c["mode"], c[names[0]]["n"], *[_s(c[n]) for n in names]]))
    out += ["", "## Intended use and limits", "",
            "- Energy of one receiver for one transfer of the dataset's file size, given its case and measured "
            "per-interface throughput; controllers compare candidate interface sets with it.",
            "- Not valid for other file sizes, congestion controls not in the training data, or another testbed.",
            "- Emulated data: energy comes from a power profile, not radios; it tests the pipeline, not phones."
            if "emulated" in p["energy_sources"] else "- Measured with USB meters on the lab testbed.", ""]
    return "\n".join(out)
