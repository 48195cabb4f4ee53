"""Hessian-vector products of a small language model's loss with respect to its
parameters, by forward over reverse: dualgen (at the defaults: the fused CPU
attention and its backward op) against native forward AD with attention by its
definition where native can (it has no forward formula for silu_backward, so not
through Llama's MLP), and against finite differences of the gradient in float64."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_ad

import dualgen.forward_ad as dual_ad

from .check import Case, by_definition, call, four_point, prepare, relative_error
from .families import BY_NAME, HAS_TRANSFORMERS

pytestmark = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")


def hvp(api, case: Case) -> list[torch.Tensor]:
    p = prepare(case.family, case.mode, case.dtype)
    leaves = {k: v.clone().requires_grad_() for k, v in p.params.items()}
    with api.dual_level():
        duals = {k: api.make_dual(v, p.param_tangents[k]) for k, v in leaves.items()}
        loss = call(case, p, duals, p.inputs).pow(2).mean()
        grads = _gradient(loss, list(leaves.values()))
        tangents = [api.unpack_dual(g).tangent for g in grads]
        return [
            torch.zeros_like(g) if t is None else t.detach()
            for g, t in zip(grads, tangents)
        ]


def _gradient(loss, params) -> list[torch.Tensor]:
    """d loss / d params; zero for a parameter the loss does not use (the token
    embeddings, with inputs_embeds given)."""
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def gradient_differences(case: Case, step: float) -> list[torch.Tensor]:
    """The four-point difference of the loss's gradient along the tangents."""
    p = prepare(case.family, case.mode, torch.float64)

    def gradient(h):
        moved = {
            k: (v + h * p.param_tangents[k]).requires_grad_()
            for k, v in p.params.items()
        }
        loss = call(case, p, moved, p.inputs).pow(2).mean()
        return _gradient(loss, list(moved.values()))

    return four_point(gradient, step)


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1).double() for t in tensors])


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hvp_of_a_small_lm(name):
    case = Case(BY_NAME[name], "eval", torch.float64, "parameters")
    ours = flat(hvp(dual_ad, case))
    assert ours.norm() > 1e-6
    try:  # native lacks forward formulas for some backward ops (silu_backward)
        with by_definition():
            native = flat(hvp(native_ad, case))
    except NotImplementedError:
        native = None
    if native is not None:
        assert relative_error(ours, native) <= 1e-9
    differences = min(
        relative_error(ours, flat(gradient_differences(case, step)))
        for step in (1e-5, 1e-3)
    )
    assert differences <= 1e-4
