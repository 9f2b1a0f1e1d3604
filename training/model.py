"""The energy model: the reference paper's MLP (5 hidden layers of 200 ReLU units), with scaling inside.

Input and output scaling are buffers of the module, so ``forward`` takes raw feature
vectors (``FeatureSpec.matrix``) and returns joules. The exported ONNX graph carries the same
scaling, so a controller needs nothing but onnxruntime and the feature order in model.json.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from training.features import Scaler


@dataclass(frozen=True)
class Architecture:
    """Layer sizes: ``hidden`` layers of ``width`` ReLU units (the paper: 5 x 200)."""

    n_features: int
    hidden: int = 5
    width: int = 200


class EnergyMLP(nn.Module):
    """Raw features -> standardise -> 5 x (Linear 200, ReLU) -> Linear 1 -> joules."""

    def __init__(self, arch: Architecture, x_scaler: Scaler, y_scaler: Scaler) -> None:
        super().__init__()
        self.arch = arch
        layers: list[nn.Module] = []
        n_in = arch.n_features
        for _ in range(arch.hidden):
            layers += [nn.Linear(n_in, arch.width), nn.ReLU()]
            n_in = arch.width
        layers.append(nn.Linear(n_in, 1))
        self.net = nn.Sequential(*layers)
        self.register_buffer("x_mean", torch.tensor(x_scaler.mean, dtype=torch.float32))
        self.register_buffer("x_scale", torch.tensor(x_scaler.scale, dtype=torch.float32))
        self.register_buffer("y_mean", torch.tensor(y_scaler.mean, dtype=torch.float32))
        self.register_buffer("y_scale", torch.tensor(y_scaler.scale, dtype=torch.float32))

    def forward_scaled(self, z: torch.Tensor) -> torch.Tensor:
        """Standardised features -> standardised energy (what the loss sees)."""
        return self.net(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Raw features (n, F) -> energy in joules (n, 1)."""
        return self.net((x - self.x_mean) / self.x_scale) * self.y_scale + self.y_mean

    def linear_layers(self) -> list[nn.Linear]:
        return [m for m in self.net if isinstance(m, nn.Linear)]


def build_model(arch: Architecture, x_scaler: Scaler, y_scaler: Scaler, seed: int) -> EnergyMLP:
    """A freshly initialised model; the seed fixes the initial weights."""
    torch.manual_seed(seed)
    return EnergyMLP(arch, x_scaler, y_scaler)
