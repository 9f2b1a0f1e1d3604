"""The training loop: Adam on standardised data, early stopping on a validation part of the train split.

Deterministic for a given seed on CPU: the seed fixes the initial weights, the validation
part (chosen by sample, so receivers of one sample stay together) and the batch order.
"""
from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from harness.errors import ConfigError
from training.features import Scaler
from training.model import Architecture, EnergyMLP, build_model


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters (all logged to MLflow and model.json)."""

    epochs: int = 500
    patience: int = 10  # epochs without improvement; at least patience_min_steps optimizer steps
    patience_min_steps: int = 100  # small datasets take one step per epoch: give them time
    batch_size: int = 1024  # large batches: fewer, fuller matmuls (see docs/training.md, bench/train.py)
    lr: float = 5e-3
    weight_decay: float = 0.0
    val_fraction: float = 0.2
    min_delta: float = 1e-4
    seed: int = 2023
    hidden: int = 5
    width: int = 200
    # Matmuls while training: "fp32", "bf16", or "auto" (bf16 where the CPU has it). fp32 by default:
    # bf16 keeps about 3 significant digits while the target differs by about 1% between cases,
    # to save a second or two on a quick fit.
    precision: str = "fp32"

    def __post_init__(self) -> None:
        checks = [("epochs", self.epochs >= 1), ("patience", self.patience >= 1),
                  ("patience_min_steps", self.patience_min_steps >= 0), ("batch_size", self.batch_size >= 1),
                  ("lr", self.lr > 0), ("val_fraction", 0 < self.val_fraction < 1), ("hidden", self.hidden >= 1),
                  ("width", self.width >= 1), ("weight_decay", self.weight_decay >= 0),
                  ("precision", self.precision in ("auto", "bf16", "fp32"))]
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"invalid value {getattr(self, name)!r}", field=name)


@dataclass(frozen=True)
class EpochStats:
    epoch: int
    train_loss: float  # MSE on standardised energy
    val_loss: float
    val_mae_j: float


@dataclass
class FitResult:
    model: EnergyMLP
    history: list[EpochStats] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False
    seconds: float = 0.0
    precision: str = "fp32"


def use_bf16(precision: str) -> bool:
    """Whether training matmuls run in bfloat16 (weights, loss and the exported model stay float32).

    CPUs with native bf16 (AVX512-BF16, AMX) multiply bf16 matrices many times faster than
    fp32; without it bf16 is emulated and slower, so "auto" uses it only where it is native.
    """
    if precision != "auto":
        return precision == "bf16"
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def validation_mask(frame: pd.DataFrame, fraction: float, seed: int) -> np.ndarray:
    """Rows of the train split held out for early stopping: whole samples, by a seeded hash."""
    sids = sorted(set(frame["sample_id"]), key=lambda s: hashlib.sha256(f"val:{seed}:{s}".encode()).hexdigest())
    if len(sids) < 2:
        raise ConfigError(f"the train split has {len(sids)} sample(s); early stopping needs at least 2 "
                          "(run more samples per case, or lower --test)")
    n_val = min(len(sids) - 1, max(1, round(len(sids) * fraction)))
    val = set(sids[:n_val])
    return frame["sample_id"].isin(val).to_numpy()


def fit(x_fit: np.ndarray, y_fit: np.ndarray, x_val: np.ndarray, y_val: np.ndarray, cfg: TrainConfig,
        on_epoch: Callable[[EpochStats], None] | None = None) -> FitResult:
    """Train an ``EnergyMLP``; scaling is fitted on ``x_fit``/``y_fit`` only. Returns the best model.

    Args:
        x_fit, y_fit: training rows (raw features, joules).
        x_val, y_val: validation rows (early stopping only).
        cfg: hyper-parameters.
        on_epoch: called after every epoch (MLflow logging, progress).
    """
    t0 = time.perf_counter()
    xs, ys = Scaler.fit(x_fit), Scaler.fit(y_fit.reshape(-1, 1))
    model = build_model(Architecture(x_fit.shape[1], cfg.hidden, cfg.width), xs, ys, cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)

    def scaled(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        xt = (torch.from_numpy(np.asarray(x, np.float32)) - model.x_mean) / model.x_scale
        yt = (torch.from_numpy(np.asarray(y, np.float32)).reshape(-1, 1) - model.y_mean) / model.y_scale
        return xt, yt

    zf, tf = scaled(x_fit, y_fit)
    zv, tv = scaled(x_val, y_val)
    # fused: one kernel for all parameters (the per-tensor loop dominated small steps on CPU)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    loss_fn = nn.MSELoss()
    best = (float("inf"), 0, copy.deepcopy(model.state_dict()))
    res = FitResult(model)
    n = len(zf)
    steps_per_epoch = -(-n // cfg.batch_size)
    patience = max(cfg.patience, -(-cfg.patience_min_steps // steps_per_epoch))
    bf16 = use_bf16(cfg.precision)
    res.precision = "bf16" if bf16 else "fp32"
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for i in range(0, n, cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model.forward_scaled(zf[idx])
            loss = loss_fn(out.float(), tf[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        model.eval()
        # float32 on purpose: bf16 validation losses made early stopping pick worse epochs
        with torch.no_grad():
            pv = model.forward_scaled(zv)
            val_loss = float(loss_fn(pv, tv))
            val_mae = float((pv - tv).abs().mean() * model.y_scale)
        st = EpochStats(epoch, total / n, val_loss, val_mae)
        res.history.append(st)
        if on_epoch:
            on_epoch(st)
        if val_loss < best[0] - cfg.min_delta:
            best = (val_loss, epoch, copy.deepcopy(model.state_dict()))
        elif epoch - best[1] >= patience:
            res.stopped_early = True
            break
    model.load_state_dict(best[2])
    model.eval()
    res.best_epoch = best[1]
    res.seconds = time.perf_counter() - t0
    return res


def predict(model: EnergyMLP, x: np.ndarray) -> np.ndarray:
    """Energy in joules for raw feature rows, shape (n,)."""
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(x, np.float32))).numpy().reshape(-1)
