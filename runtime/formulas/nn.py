"""Helpers for nn ops: normalization, losses, dropout, bilinear and weight norm.

Layer, batch and group norm (their tangents, normalized inputs and the statistics'
derivatives), the loss reductions and binary cross entropy (with and without
logits), native_dropout's scale, `_trilinear` (behind nn.functional.bilinear), and
weight norm's g and norms viewed to broadcast against v (`_weight_norm_interface`).
The forward formulas of these ops' backward ops live in `backward_ops`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dualgen.generated.helpers import as_real_like, group_shape

__all__ = [
    "group_norm_backward",
    "trilinear_grads",
]


def group_norm_backward(
    grad_out, grad_mean, grad_rstd, input, mean, rstd, weight, N, C, HxW, group, mask
):
    """Gradients of native_group_norm (input, weight, bias) from those of all three
    outputs: native_group_norm_backward for the output's, plus what the saved mean
    and rstd contribute to the input's (the backward of group_norm_mean_tangent
    and group_norm_rstd_tangent)."""
    input_grad, weight_grad, bias_grad = torch.ops.aten.native_group_norm_backward(
        grad_out, input, mean, rstd, weight, N, C, HxW, group, mask
    )
    shape = group_shape(input, group)
    centered = input.reshape(shape) - mean.unsqueeze(-1)
    stats_grad = (
        grad_mean.unsqueeze(-1) - (grad_rstd * rstd**3).unsqueeze(-1) * centered
    ) / max(shape[-1], 1)
    stats_grad = stats_grad.reshape(input.shape)
    input_grad = stats_grad if input_grad is None else input_grad + stats_grad
    return input_grad, weight_grad, bias_grad


def _unsqueezed(t: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    for d in sorted(dims):
        t = t.unsqueeze(d)
    return t


def trilinear_grads(grad, i1, i2, i3, expand1, expand2, expand3, sumdim) -> tuple:
    """Gradients of `_trilinear` (i1, i2, i3): each input unsqueezed at its `expand`
    dims, the three multiplied (broadcasting) and summed over `sumdim`. An input's
    gradient is `grad` (unsqueezed back at `sumdim`) times the conjugate product of
    the other two, summed to the input's expanded shape."""
    e1, e2, e3 = (
        _unsqueezed(i1, expand1),
        _unsqueezed(i2, expand2),
        _unsqueezed(i3, expand3),
    )
    g = _unsqueezed(grad, sumdim)

    def one(e, a, b, like):
        full = g * (a * b).conj()
        return as_real_like(full.sum_to_size(e.shape), like).reshape(like.shape)

    return one(e1, e2, e3, i1), one(e2, e1, e3, i2), one(e3, e1, e2, i3)
