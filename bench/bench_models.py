"""The small models several benchmarks measure (torch only: bench/memory.py's
fresh processes import this before choosing whether to import dualgen)."""

from __future__ import annotations

import torch
from torch import nn


def make_convnet(channels: int) -> nn.Module:
    """Two 3x3 convolutions with batch norm, pooling and a linear head (eval)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, channels, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(channels, 10),
    ).eval()


def make_encoder_layer(width: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(
        width, 4, 2 * width, dropout=0.0, batch_first=True
    ).eval()
