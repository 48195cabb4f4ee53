"""Helpers for learnable fake quantization
(`_fake_quantize_learnable_per_tensor_affine`,
`_fake_quantize_learnable_per_channel_affine`, quantization-aware training):
autograd's straight-through derivatives in x, scale and zero point, in both
modes.
"""

from __future__ import annotations

import torch

__all__ = [
    "fake_quantize_learnable_per_channel_grads",
    "fake_quantize_learnable_per_channel_tangent",
    "fake_quantize_learnable_per_tensor_grads",
    "fake_quantize_learnable_per_tensor_tangent",
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


def _fake_quant_partials(self, scale, zero_point, quant_min: int, quant_max: int):
    """(inside, numerator, weight, d out / d z) element-wise for the broadcastable
    scale and (integer) zero point, in self's dtype, grad_factor not applied:
    d out / d s = numerator * weight. Written as native's kernel computes it
    (fused multiply-adds, the weight 1 / s applied last) so that float32
    gradients agree with autograd's to the last bit."""
    s = scale.to(self.dtype)
    z = zero_point.to(self.dtype)
    inv = s.reciprocal()
    xq = torch.round(torch.addcmul(z, self, inv))
    inside = (xq >= quant_min).logical_and(xq <= quant_max)
    numerator = torch.where(
        inside,
        torch.addcmul(-self, xq.clamp(quant_min, quant_max) - z, s),
        torch.where(xq < quant_min, quant_min - z, quant_max - z),
    )
    weight = torch.where(inside, inv, torch.ones_like(inv))
    d_zero_point = torch.where(inside, torch.zeros_like(self), -s)
    return inside, numerator, weight, d_zero_point


def _per_tensor_qparams(scale, zero_point, quant_min: int, quant_max: int):
    s = scale.reshape(-1)[0]
    z = torch.clamp(zero_point.reshape(-1)[0] + 0.5, quant_min, quant_max).trunc()
    return s, z


def _channel_shape(self, axis: int) -> list:
    shape = [1] * self.dim()
    shape[axis] = -1
    return shape


def _per_channel_qparams(self, scale, zero_point, axis, quant_min, quant_max):
    shape = _channel_shape(self, axis)
    z = torch.round(zero_point).clamp(quant_min, quant_max)
    return scale.reshape(shape), z.reshape(shape)


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
    s, z = _per_tensor_qparams(scale, zero_point, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = _fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    return (
        grad * inside,
        _per_tensor_sum(grad * numerator * weight * grad_factor, scale),
        _per_tensor_sum(grad * d_zero_point * grad_factor, zero_point),
    )


def fake_quantize_learnable_per_tensor_tangent(
    self_t,
    scale_t,
    zero_point_t,
    self,
    scale,
    zero_point,
    quant_min: int,
    quant_max: int,
    grad_factor: float,
) -> torch.Tensor:
    """Tangent of _fake_quantize_learnable_per_tensor_affine: the transpose of
    `fake_quantize_learnable_per_tensor_grads` (tangents of scale and zero_point
    read at their first element, as the op reads the values)."""
    s, z = _per_tensor_qparams(scale, zero_point, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = _fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    d_scale = numerator * weight
    ds = scale_t.reshape(-1)[0].to(self.dtype)
    dz = zero_point_t.reshape(-1)[0].to(self.dtype)
    return self_t * inside + (d_scale * ds + d_zero_point * dz) * grad_factor


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
    s, z = _per_channel_qparams(self, scale, zero_point, axis, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = _fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    dims = [d for d in range(self.dim()) if d != axis]
    return (
        grad * inside,
        (grad * numerator * weight * grad_factor).sum(dims).to(scale.dtype),
        (grad * d_zero_point * grad_factor).sum(dims).to(zero_point.dtype),
    )


def fake_quantize_learnable_per_channel_tangent(
    self_t,
    scale_t,
    zero_point_t,
    self,
    scale,
    zero_point,
    axis: int,
    quant_min: int,
    quant_max: int,
    grad_factor: float,
) -> torch.Tensor:
    """Tangent of _fake_quantize_learnable_per_channel_affine: the transpose of
    `fake_quantize_learnable_per_channel_grads`."""
    s, z = _per_channel_qparams(self, scale, zero_point, axis, quant_min, quant_max)
    inside, numerator, weight, d_zero_point = _fake_quant_partials(
        self, s, z, quant_min, quant_max
    )
    d_scale = numerator * weight
    shape = _channel_shape(self, axis)
    ds = scale_t.reshape(shape).to(self.dtype)
    dz = zero_point_t.reshape(shape).to(self.dtype)
    return self_t * inside + (d_scale * ds + d_zero_point * dz) * grad_factor
