"""Export: ``model.onnx`` (what controllers load), ``model.pt``, ``model.json`` and ``card.md``.

The ONNX graph is written directly from the weights with ``onnx.helper`` (Sub, Div, then
Gemm/Relu x 5, Gemm, Mul, Add), rather than through ``torch.onnx.export``: recent PyTorch
exports through the dynamo exporter, which needs onnxscript and changes between releases,
and an MLP is six Gemm nodes. Tests check that ONNX Runtime and PyTorch agree.
The input is ``features`` (float32, [n, F], order in model.json), the output ``energy_j``
(float32, [n, 1]); scaling is inside the graph.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from harness.files import atomic_write
from training.model import Architecture, EnergyMLP
from training.runtime import INPUT_NAME, MODEL_SCHEMA_VERSION, OUTPUT_NAME

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime >= 1.14, which controllers may pin


def to_onnx(model: EnergyMLP, producer_version: str = "", features: list[str] | None = None) -> onnx.ModelProto:
    """The model as an ONNX graph with its input and output scaling.

    ``features`` (the input columns in order) go to the file's ``metadata_props`` too, so the ONNX
    file alone says how to build its input (``mplab.features``: a JSON list; ``mplab.output_unit``).
    """
    def init(name: str, t: torch.Tensor) -> onnx.TensorProto:
        return numpy_helper.from_array(t.detach().cpu().numpy().astype(np.float32), name)

    inits = [init("x_mean", model.x_mean), init("x_scale", model.x_scale),
             init("y_mean", model.y_mean), init("y_scale", model.y_scale)]
    nodes = [helper.make_node("Sub", [INPUT_NAME, "x_mean"], ["x_centred"]),
             helper.make_node("Div", ["x_centred", "x_scale"], ["h0"])]
    layers = model.linear_layers()
    for i, lin in enumerate(layers):
        inits += [init(f"W{i}", lin.weight), init(f"b{i}", lin.bias)]
        out = f"g{i}"
        nodes.append(helper.make_node("Gemm", [f"h{i}", f"W{i}", f"b{i}"], [out], transB=1))
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"h{i + 1}"]))
    last = f"g{len(layers) - 1}"
    nodes += [helper.make_node("Mul", [last, "y_scale"], ["y_scaled"]),
              helper.make_node("Add", ["y_scaled", "y_mean"], [OUTPUT_NAME])]
    graph = helper.make_graph(
        nodes, "mplab_energy_mlp",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["n", model.arch.n_features])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["n", 1])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mplab",
                          producer_version=producer_version)
    m.ir_version = IR_VERSION
    props = {"mplab.output_unit": "J", "mplab.input": INPUT_NAME, "mplab.output": OUTPUT_NAME}
    if features is not None:
        if len(features) != model.arch.n_features:
            raise ValueError(f"{len(features)} feature names for a model of {model.arch.n_features} inputs")
        props["mplab.features"] = json.dumps(list(features))
    helper.set_model_props(m, props)
    onnx.checker.check_model(m, full_check=True)
    return m


def save_onnx(model: EnergyMLP, path: Path, producer_version: str = "",
              features: list[str] | None = None) -> onnx.ModelProto:
    """Write ``model.onnx``; returns the proto (MLflow logs the same graph)."""
    proto = to_onnx(model, producer_version, features)
    atomic_write(path, proto.SerializeToString())
    return proto


def save_pt(model: EnergyMLP, path: Path, features: dict) -> None:
    """Weights, buffers and architecture as plain tensors and values (loads with ``weights_only=True``)."""
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"schema_version": MODEL_SCHEMA_VERSION, "architecture": asdict(model.arch),
                "state_dict": model.state_dict(), "features": features}, tmp)
    tmp.replace(path)


def load_pt(path: Path) -> EnergyMLP:
    """Rebuild an ``EnergyMLP`` from ``model.pt``."""
    from training.features import Scaler

    doc = torch.load(path, weights_only=True)
    arch = Architecture(**doc["architecture"])
    sd = doc["state_dict"]
    one = Scaler((0.0,) * arch.n_features, (1.0,) * arch.n_features)
    m = EnergyMLP(arch, one, Scaler((0.0,), (1.0,)))
    m.load_state_dict(sd)
    m.eval()
    return m


def write_json(path: Path, doc: dict) -> None:
    atomic_write(path, (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode())
