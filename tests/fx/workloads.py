"""The functions both program transforms are tested on (float64 unless said)."""

from __future__ import annotations

import torch
from torch import nn

F64 = torch.float64


def fresh(t):
    """A new value like `t` (integer tensors, indices, stay as they are)."""
    if not isinstance(t, torch.Tensor):
        return t
    return torch.randn_like(t) if t.is_floating_point() or t.is_complex() else t


def chain(x):
    y = x.sin() * x.cos()
    y = y.exp() + x
    y = torch.tanh(y) * 0.5
    return torch.sigmoid(y) - x


def mlp_parameters():
    """(f, parameters): an MLP's output as a function of its parameters."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach() for p in model.parameters())
    x = torch.randn(5, 4, dtype=F64)

    def f(*ps):
        return torch.func.functional_call(model, dict(zip(names, ps)), (x,))

    return f, params


def convnet_in_eval():
    """(model, input): convolutions and batch norm with running statistics."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16, 2),
    ).double()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    return model.eval(), torch.randn(2, 3, 4, 4, dtype=F64)


def transformer_layer(dtype=F64):
    """(f, input): an encoder layer in eval, attention by its definition."""
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    layer = layer.to(dtype).eval()

    def f(x):
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            return layer(x)

    return f, torch.randn(2, 5, 8, dtype=dtype)


def batch_norm_in_training_and_a_fill():
    """(f, input): batch norm updating its running statistics (a functional
    variant in the traced graph), then an in-place fill of a slice."""
    bn = nn.BatchNorm1d(3).double()

    def f(x):
        z = bn(x).clone()
        z[:, 0].zero_()
        return z

    return f, torch.randn(4, 3, dtype=F64)


def embedding_with_max_norm():
    """(f, weight): the weight renormalised in place through a detached alias."""
    indices = torch.tensor([[1, 2], [4, 5]])

    def f(w):
        return nn.functional.embedding(indices, w, max_norm=1.0)

    return f, torch.randn(10, 3, dtype=F64)
