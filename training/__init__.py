"""Training: the energy model of the reference paper (a 5 x 200 ReLU MLP) from mplab datasets.

Modules, one concept each:
    features   dataset rows -> feature matrix (order, encodings) and target
    model      the MLP, with its input/output scaling inside (so exports need no extra code)
    fit        the training loop: Adam, early stopping on a validation part of the train split
    evaluate   MAE / MAPE / R2 on the test split, overall and per case, beside baselines
    tracking   MLflow: mlflow.start_run (source, commit, user), batched per-epoch metrics, FINISHED or FAILED
    registry   registered models: list, promote, pull (checksums verified), models:/ URIs for controllers
               (no torch)
    export     model.onnx (written from the weights), model.pt, model.json
    runtime    OnnxEnergyModel: load and predict with onnxruntime, no torch (for controllers)
    card       the model card
    pipeline   all of the above for `mplab train` (dataset input and the ONNX flavour logged to MLflow)
Reads datasets only (``harness.dataset.build.load_dataset``); controllers load ``model.onnx`` with
onnxruntime alone (see ``training.runtime.OnnxEnergyModel``), or resolve ``models:/NAME@alias``
with ``training.registry`` (no torch either). Synthetic campaigns for tests and benches are
``rigs.synthetic``.

Leaves to others: measuring and building datasets (``harness``), using the model
(controllers), reports (``analysis``). Never imports lte, wifi, controller, analysis, mplab.
"""
