"""Helpers for learnable fake quantization
(`_fake_quantize_learnable_per_tensor_affine`,
`_fake_quantize_learnable_per_channel_affine`, quantization-aware training):
autograd's straight-through derivatives in x, scale and zero point, in both
modes.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    fake_quant_partials,
    per_channel_qparams,
    per_tensor_qparams,
)

__all__ = [
    "fake_quantize_learnable_per_channel_grads",
    "fake_quantize_learnable_per_tensor_grads",
]

# ---------------------------------------------------------------- fake quantization
# Quantization-aware training's learnable fake quantization,
#   out = (clamp(round(x / s + z), qmin, qmax) - z) s,
# is piecewise constant in x, s and z; autograd differentiates it by the
# straight-through estimator (round taken as the identity), and the helpers give
# the same derivatives in both modes so that the JVP is the transpose of the VJP:
#   d/dx = 1 inside the range, 0 outside;
#   d/ds = (out - x) / s inside, qmin - z below, qmax - z above;
#   d/dz = 0 inside, -s outside;
# the scale and zero-point terms times grad_factor. The zero point used is native
# backward's: per tensor, trunc(clamp(z + 0.5, qmin, qmax)); per channel,
# clamp(round(z), qmin, qmax). Computed in the input's dtype (native's backward
# runs in float32 only).


def _per_tensor_sum(t, like):
    """The sum of `t`, as the gradient of the one-element `like` (scale[0])."""
    total = t.sum().to(like.dtype).reshape(1)
    return torch.nn.functional.pad(total, (0, like.numel() - 1)).reshape(like.shape)


def fake_quantize_learnable_per_tensor_grads(
    grad, self, scale, zero_point, quant_min: int, quant_max: int, grad_factor: float
) -> tuple:
    """Gradients of _fake_quantize_learnable_per_tensor_affine for (self, scale,
    zero_point) by the straight-through estimator, as autograd's (see the section
    comment); in any floating dtype."""
    s, z = per_tensor_qparams(scale, zero_point, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    return (
        grad * inside,
        _per_tensor_sum(grad * numerator * weight * grad_factor, scale),
        _per_tensor_sum(grad * d_zero_point * grad_factor, zero_point),
    )


def fake_quantize_learnable_per_channel_grads(
    grad,
    self,
    scale,
    zero_point,
    axis: int,
    quant_min: int,
    quant_max: int,
    grad_factor: float,
) -> tuple:
    """Gradients of _fake_quantize_learnable_per_channel_affine for (self, scale,
    zero_point) by the straight-through estimator, as autograd's (see the section
    comment), the scale and zero-point terms summed over all but `axis`."""
    s, z = per_channel_qparams(self, scale, zero_point, axis, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    dims = [d for d in range(self.dim()) if d != axis]
    return (
        grad * inside,
        (grad * numerator * weight * grad_factor).sum(dims).to(scale.dtype),
        (grad * d_zero_point * grad_factor).sum(dims).to(zero_point.dtype),
    )
