"""One ONNX Runtime session set-up for every reader of an exported energy model.

The controller (``controller.model.EnergyModel``) and the training side (``training.runtime``) both
open ``model.onnx`` here, so a decision made in a campaign and a prediction checked after training
run the same graph with the same options. The layer rules keep ``controller`` from importing
``training``; both may import ``harness``. ``onnxruntime`` is imported when a session is opened,
not with this module (importing it costs ~0.3 s; only model readers need it).

The options are for small models called one decision at a time on a shared 2-core machine:

- ``intra_op_num_threads`` (default 1): ONNX Runtime runs the operators on the calling thread and
  creates no intra-op pool. A 5x200 MLP on a few rows is ~15 us of arithmetic; handing it to a pool
  costs more in wake-ups than it saves, and pool threads compete with the caller for 2 cores.
- ``inter_op_num_threads`` 1 and sequential execution: the graph is a chain, nothing to overlap.
- ``session.intra_op.allow_spinning`` / ``session.inter_op.allow_spinning`` "0": when a caller asks
  for more than one thread, idle pool threads block instead of spinning (ONNX Runtime spins by
  default, burning a core between calls that a loaded machine gives to someone else).

Example::

    sess = open_session(Path("models/quick/model.onnx"))
    sess.run(["energy_j"], {"features": x})
"""
from __future__ import annotations

from pathlib import Path


def session_options(threads: int = 1):
    """``onnxruntime.SessionOptions`` as described in the module docstring."""
    import onnxruntime as ort

    if threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return opts


def open_session(model_path: str | Path, threads: int = 1):
    """An ``onnxruntime.InferenceSession`` on the CPU provider with ``session_options(threads)``."""
    import onnxruntime as ort

    return ort.InferenceSession(str(model_path), sess_options=session_options(threads),
                                providers=["CPUExecutionProvider"])
