"""examples/forward_gradient: its directional derivative is backpropagation's
gradient along the direction, and its training lowers the loss."""

from __future__ import annotations

import pytest
import torch

from .families import HAS_TRANSFORMERS

pytestmark = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")


def test_the_derivative_is_the_gradient_along_the_direction():
    from examples.forward_gradient.train import loss_and_derivative, small_lm

    torch.manual_seed(0)
    model = small_lm().eval()
    params = {k: p.detach() for k, p in model.named_parameters()}
    direction = {k: torch.randn_like(p) for k, p in params.items()}
    tokens = torch.randint(0, 64, (2, 16))
    loss, derivative = loss_and_derivative(model, params, direction, tokens)

    leaves = {k: p.clone().requires_grad_() for k, p in params.items()}
    out = torch.func.functional_call(model, leaves, (tokens,), {"labels": tokens})
    grads = torch.autograd.grad(out.loss, list(leaves.values()), allow_unused=True)
    along = sum(
        (g * direction[k]).sum() for k, g in zip(leaves, grads) if g is not None
    ).item()
    assert loss == pytest.approx(out.loss.item(), rel=1e-6)
    assert derivative == pytest.approx(along, rel=1e-4, abs=1e-6)


def test_forward_gradient_training_lowers_the_loss():
    from examples.forward_gradient.train import train

    losses = train(steps=30)
    assert losses[-1] < losses[0] - 0.02
