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

from dualgen.generated.helpers import as_real_like

__all__ = [
    "apply_loss_reduction",
    "batch_norm_tangent",
    "batch_norm_xhat",
    "bce_logits_self_derivative",
    "bce_logits_target_derivative",
    "bce_self_derivative",
    "bce_target_derivative",
    "channel_view",
    "dropout_scale",
    "expand_loss_grad",
    "group_norm_backward",
    "group_norm_mean_tangent",
    "group_norm_rstd_tangent",
    "group_norm_tangent",
    "group_norm_xhat",
    "layer_norm_tangent",
    "layer_norm_xhat",
    "norm_affine_tangent",
    "trilinear_grads",
    "weight_norm_broadcast",
]


def apply_loss_reduction(t: torch.Tensor, reduction: int) -> torch.Tensor:
    """A loss's reduction (0: none, 1: mean, 2: sum) applied to element-wise terms."""
    if reduction == 1:
        return t.mean()
    if reduction == 2:
        return t.sum()
    return t


def expand_loss_grad(
    grad: torch.Tensor, like: torch.Tensor, reduction: int
) -> torch.Tensor:
    """Backward of `apply_loss_reduction`: the gradient of the reduced loss spread
    over the element-wise terms shaped like `like`."""
    if reduction == 1:
        return grad.expand(like.shape) / like.numel()
    if reduction == 2:
        return grad.expand(like.shape)
    return grad


def channel_view(t: torch.Tensor, ndim: int) -> torch.Tensor:
    """A per-channel vector [C] viewed as [C, 1, ..., 1] so that it broadcasts
    against a [N, C, *] tensor of `ndim` dimensions."""
    return t.reshape([-1] + [1] * (ndim - 2))


def _normalized_tangent(input_t, xhat, rstd, dims) -> torch.Tensor:
    # d((x - mean) * rstd) = rstd * (dx - mean(dx) - xhat * mean(xhat * dx)),
    # in the input tangent's dtype, as native's (a float32 tangent of a float64
    # input stays float32 until a weight promotes it).
    t = rstd * (
        input_t
        - input_t.mean(dims, keepdim=True)
        - xhat * (xhat * input_t).mean(dims, keepdim=True)
    )
    return t.to(input_t.dtype)


def norm_affine_tangent(
    normalized_t, xhat, weight_p, weight_t, bias_t, ndim: int | None = None
):
    """Tangent of a normalization's `xhat * weight + bias` (weight and bias viewed
    per channel of a `ndim`-dimensional input where `ndim` is given), from the
    normalized input's tangent, in native's dtype: native adds the weight's and
    the bias's shares into the normalized tangent in place where they carry
    tangents (the dtype stays) and multiplies by a weight without one out of
    place (it promotes). An absent tangent reaches a helper as zeros of its
    primal's dtype: a weight tangent of another dtype is a present one; one of
    the weight's dtype is taken for absent (the dtype is the same either way
    unless the normalized tangent is narrower than the weight)."""
    out = normalized_t
    if weight_p is not None:
        weight, weight_tangent = weight_p, weight_t
        if ndim is not None:
            weight = channel_view(weight_p, ndim)
            weight_tangent = channel_view(weight_t, ndim)
        dtype = normalized_t.dtype
        if weight_t.dtype == weight_p.dtype:
            dtype = torch.promote_types(dtype, weight_p.dtype)
        out = (normalized_t * weight + xhat * weight_tangent).to(dtype)
    if bias_t is not None:
        bias = bias_t if ndim is None else channel_view(bias_t, ndim)
        out = (out + bias).to(out.dtype)
    return out


# Layer and batch norm's formulas compute the statistics from the input again
# rather than read the op's saved ones: those carry no tangent and native autograd
# does not differentiate them, so at an outer level (nested levels, reverse over
# forward) a formula reading them would lose their share of the second derivative.


def _statistics(input_p, dims, eps):
    # mean and 1 / sqrt(biased variance + eps) over `dims`, kept broadcastable.
    var, mean = torch.var_mean(input_p, dims, correction=0, keepdim=True)
    return mean, (var + eps).rsqrt()


def _layer_norm_dims(normalized_shape) -> list[int]:
    return list(range(-len(normalized_shape), 0))


def layer_norm_xhat(input_p, normalized_shape, eps: float):
    """native_layer_norm's normalized input (before weight and bias)."""
    mean, rstd = _statistics(input_p, _layer_norm_dims(normalized_shape), eps)
    return (input_p - mean) * rstd


def layer_norm_tangent(input_t, input_p, normalized_shape, eps: float):
    """Tangent of native_layer_norm's normalized input (before weight and bias)
    from the input's tangent."""
    dims = _layer_norm_dims(normalized_shape)
    mean, rstd = _statistics(input_p, dims, eps)
    xhat = (input_p - mean) * rstd
    return _normalized_tangent(input_t, xhat, rstd, dims)


def _batch_norm_stats(input_p, running_mean, running_var, training, eps):
    ndim = input_p.dim()
    if training:
        return _statistics(input_p, [0] + list(range(2, ndim)), eps)
    return (
        channel_view(running_mean, ndim),
        channel_view((running_var + eps).rsqrt(), ndim),
    )


def batch_norm_xhat(input_p, running_mean, running_var, training, eps):
    """native_batch_norm's normalized input (before weight and bias)."""
    mean, invstd = _batch_norm_stats(input_p, running_mean, running_var, training, eps)
    return (input_p - mean) * invstd


def batch_norm_tangent(input_t, input_p, running_mean, running_var, training, eps):
    """Tangent of native_batch_norm's normalized input (before weight and bias)
    from the input's tangent: batch statistics in training, running ones in eval."""
    mean, invstd = _batch_norm_stats(input_p, running_mean, running_var, training, eps)
    if training:
        dims = [0] + list(range(2, input_p.dim()))
        t = _normalized_tangent(input_t, (input_p - mean) * invstd, invstd, dims)
    else:
        t = input_t * invstd
    return t


def group_norm_xhat(input_p, mean, rstd, group: int):
    """native_group_norm's normalized input (before weight and bias)."""
    x = input_p.reshape(_group_shape(input_p, group))
    return ((x - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(input_p.shape)


def _group_shape(t: torch.Tensor, group: int) -> list[int]:
    # [N, group, C / group * HxW], written out so that empty inputs reshape too.
    return [t.shape[0], group, t.shape[1:].numel() // group]


def group_norm_tangent(input_t, input_p, mean, rstd, group: int):
    """Tangent of native_group_norm's normalized input (before weight and bias)
    from the input's tangent; `mean`, `rstd` ([N, group]) its saved statistics."""
    shape = _group_shape(input_p, group)
    xhat = (input_p.reshape(shape) - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)
    return _normalized_tangent(
        input_t.reshape(shape), xhat, rstd.unsqueeze(-1), [-1]
    ).reshape(input_p.shape)


def bce_self_derivative(self, target, weight):
    """d binary_cross_entropy / d self, element-wise (unreduced):
    w * (self - target) / (self * (1 - self)), the denominator kept from 0 as torch does.
    """
    d = (self - target) / (self * (1 - self)).clamp_min(1e-12)
    return d if weight is None else d * weight


def bce_target_derivative(self, weight):
    """d binary_cross_entropy / d target, element-wise (unreduced):
    w * (log(1 - self) - log(self)), each log clamped at -100 as the forward is."""
    d = (1 - self).log().clamp_min(-100) - self.log().clamp_min(-100)
    return d if weight is None else d * weight


def dropout_scale(p: float, train) -> float:
    """The factor native_dropout applies to kept elements: 1/(1-p) in training
    (0 when p is 1), 1 when `train` is False."""
    if train is False:
        return 1.0
    return 0.0 if p == 1 else 1.0 / (1.0 - p)


def group_norm_mean_tangent(input_t, group: int):
    """Tangent of native_group_norm's saved mean ([N, group]): the mean of the
    input's tangent over each group."""
    return input_t.reshape(_group_shape(input_t, group)).mean(-1)


def group_norm_rstd_tangent(input_t, input_p, mean, rstd, group: int):
    """Tangent of native_group_norm's saved rstd ([N, group]), 1 / sqrt(var + eps)
    of each group: -rstd^3 * mean((x - mean) * dx) over the group."""
    shape = _group_shape(input_p, group)
    centered = input_p.reshape(shape) - mean.unsqueeze(-1)
    return -(rstd**3) * (centered * input_t.reshape(shape)).mean(-1)


def group_norm_backward(
    grad_out, grad_mean, grad_rstd, input, mean, rstd, weight, N, C, HxW, group, mask
):
    """Gradients of native_group_norm (input, weight, bias) from those of all three
    outputs: native_group_norm_backward for the output's, plus what the saved mean
    and rstd contribute to the input's (the backward of the two tangents above)."""
    input_grad, weight_grad, bias_grad = torch.ops.aten.native_group_norm_backward(
        grad_out, input, mean, rstd, weight, N, C, HxW, group, mask
    )
    shape = _group_shape(input, group)
    centered = input.reshape(shape) - mean.unsqueeze(-1)
    stats_grad = (
        grad_mean.unsqueeze(-1) - (grad_rstd * rstd**3).unsqueeze(-1) * centered
    ) / max(shape[-1], 1)
    stats_grad = stats_grad.reshape(input.shape)
    input_grad = stats_grad if input_grad is None else input_grad + stats_grad
    return input_grad, weight_grad, bias_grad


def bce_logits_self_derivative(self, target, weight, pos_weight):
    """d binary_cross_entropy_with_logits / d self, element-wise (unreduced):
    w * (sigmoid(x) * (1 - y) - (1 - sigmoid(x)) * pw * y), pw = 1 without pos_weight.
    """
    sig = self.sigmoid()
    if pos_weight is None:
        d = sig - target
    else:
        d = sig * (1 - target) - (1 - sig) * pos_weight * target
    return d if weight is None else d * weight


def bce_logits_target_derivative(self, weight, pos_weight):
    """d binary_cross_entropy_with_logits / d target, element-wise (unreduced):
    w * (log(1 - sigmoid(x)) - pw * log(sigmoid(x))) = -w * (x + (pw - 1) log sigmoid(x)).
    """
    d = -self
    if pos_weight is not None:
        d = d - (pos_weight - 1) * torch.nn.functional.logsigmoid(self)
    return d if weight is None else d * weight


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


def weight_norm_broadcast(t: torch.Tensor, v: torch.Tensor, dim: int) -> torch.Tensor:
    """`t`, one value per slice of `v` along `dim` (weight norm's g or norms, flat or
    keepdim-shaped), viewed to broadcast against `v`: v.size(dim) at `dim`, 1
    elsewhere, as torch.norm_except_dim(v, 2, dim) is shaped; dim = -1 means one
    value for the whole tensor (norm_except_dim's convention)."""
    if dim == -1:
        return t.reshape([1] * v.dim())
    shape = [1] * v.dim()
    shape[dim] = v.size(dim)
    return t.reshape(shape)
