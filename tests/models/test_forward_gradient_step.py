"""The memory benchmark's forward-gradient step (bench/memory_workloads.py,
`training-step`) at a small size in float64: a transformer language model from
torch.nn in training mode, its attention through scaled_dot_product_attention's
fused CPU kernel (dualgen's rule), against native forward AD through the math
attention and against backpropagation's gradient along the direction. The
benchmark compares float32 figures with a loose tolerance; this is the tight one."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_ad
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import dualgen.forward_ad as dual_ad


class _TinyLanguageModel(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        block = nn.TransformerEncoderLayer(
            width, 4, 2 * width, dropout=0.0, batch_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(tokens)))


def _setup():
    torch.manual_seed(0)
    model = _TinyLanguageModel().double().train()
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for p in model.parameters()]
    tokens = torch.randint(0, 50, (3, 17))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)
    direction = [torch.randn_like(p) for p in params]

    def loss_of(*ps: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(model, dict(zip(names, ps)), (inputs,))
        return F.cross_entropy(logits.flatten(0, 1), targets)

    return loss_of, params, direction


def _derivative(api, loss_of, params, direction) -> float:
    with api.dual_level():
        duals = [api.make_dual(p, v) for p, v in zip(params, direction)]
        return api.unpack_dual(loss_of(*duals)).tangent.item()


def test_forward_gradient_step_matches_native_and_backprop():
    loss_of, params, direction = _setup()
    ours = _derivative(dual_ad, loss_of, params, direction)
    with sdpa_kernel([SDPBackend.MATH]):  # native has no rule for the fused kernel
        native = _derivative(native_ad, loss_of, params, direction)
    leaves = [p.clone().requires_grad_() for p in params]
    grads = torch.autograd.grad(loss_of(*leaves), leaves)
    along = sum((g * v).sum() for g, v in zip(grads, direction)).item()
    assert ours == pytest.approx(native, rel=1e-10, abs=1e-12)
    assert ours == pytest.approx(along, rel=1e-10, abs=1e-12)
