"""Helpers for element-wise ops, and the general ones every family uses.

The general ones: `scale`/`scale_conj` (alpha, beta factors), `unbroadcast`,
`as_real_like`, `copy_broadcast`, and `conform`/`fill_absent`, which generated
kernels call themselves. The element-wise ones: the derivatives of pow, clamp,
maximum/minimum, angle, sgn, logit, mvlgamma, nan_to_num and rounding division.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dualgen.generated.helpers import as_real_like, unbroadcast
from dualgen.taylor_series import JetTensor

__all__ = [
    "angle_grad",
    "clamp_tensor_grads",
    "conform",
    "fill_absent",
    "mvlgamma_derivative",
    "pow_exponent_derivative",
    "pow_self_derivative",
    "scale",
    "scale_conj",
]


def scale(t: torch.Tensor, factor) -> torch.Tensor:
    """`t * factor`, skipping the multiplication when the factor is 1 (alpha, beta)."""
    return t if _is_one(factor) else t * factor


def scale_conj(t: torch.Tensor, factor) -> torch.Tensor:
    """`t * conj(factor)` for a Python or 0-d scalar factor; backward of `scale`."""
    if _is_one(factor):
        return t
    if isinstance(factor, complex):
        factor = factor.conjugate()
    elif isinstance(factor, torch.Tensor):
        factor = factor.conj()
    return t * factor


def _is_one(factor) -> bool:
    return not isinstance(factor, torch.Tensor) and factor == 1


def conform(
    tangent: torch.Tensor | None, result: torch.Tensor | None
) -> torch.Tensor | None:
    """Give a tangent its primal's shape (in the primal's layout).

    Generated kernels call this where a term was dropped for an absent tangent, so
    the remaining term may have an input's shape rather than the broadcast output's.
    The tangent keeps its dtype, as in native forward AD (its real part where the
    output is real). An output the op did not compute (None: a backward op's
    output_mask) has no tangent.
    """
    if tangent is None or result is None:
        return None
    tangent = as_real_like(tangent, result)
    if tangent.is_nested or result.is_nested:
        # (A nested tensor has no shape: an op's nested tangent has its output's
        # components; a dense one is broadcast into them.)
        if tangent.is_nested:
            return tangent
        return torch.zeros_like(result, dtype=tangent.dtype) + tangent
    if tangent.shape == result.shape:
        return tangent
    if isinstance(tangent, JetTensor):
        # A Taylor series cannot be copied into a plain tensor (and has no
        # layout of its own to keep): broadcast, out of place.
        return tangent.expand(result.shape).clone()
    return torch.empty_like(result, dtype=tangent.dtype).copy_(tangent)


def fill_absent(
    tangents: Sequence[torch.Tensor | None] | None,
    primals: Sequence[torch.Tensor | None],
) -> list[torch.Tensor | None]:
    """Zeros in place of the absent tangents of a tensor list (needed by `cat`);
    `tangents` None: zeros for every tensor of the list."""
    if tangents is None:
        tangents = [None] * len(primals)
    return [
        torch.zeros_like(p) if t is None and p is not None else t
        for t, p in zip(tangents, primals)
    ]


def pow_self_derivative(self: torch.Tensor, exponent) -> torch.Tensor:
    """d self**exponent / d self = exponent * self**(exponent - 1), 0 where exponent is 0.

    Only where the product is not finite (self 0 or nan) is it replaced: elsewhere
    0 * self**-1 is 0 already, and keeps its derivative with respect to the
    exponent (self**-1), which a tangent's gradient needs (reverse over forward)."""
    derivative = exponent * self.pow(exponent - 1)
    if isinstance(exponent, torch.Tensor):
        undefined = (exponent == 0) & derivative.isfinite().logical_not()
        return torch.where(undefined, 0.0, derivative)
    return derivative if exponent != 0 else torch.zeros_like(derivative)


def pow_exponent_derivative(self, exponent, result: torch.Tensor) -> torch.Tensor:
    """d self**exponent / d exponent = result * log(self), 0 where self is 0 and the
    exponent non-negative (the limit), as torch defines it."""
    base = (
        self
        if isinstance(self, torch.Tensor)
        else torch.tensor(self, dtype=result.dtype)
    )
    derivative = result * base.log()
    at_zero = (base == 0) & (
        exponent.real >= 0 if exponent.is_complex() else exponent >= 0
    )
    return torch.where(at_zero, 0.0, derivative)


def mvlgamma_derivative(self: torch.Tensor, p: int) -> torch.Tensor:
    """d mvlgamma(self, p) / d self: the sum of digamma(self - i / 2) over i < p."""
    offsets = torch.arange(p, dtype=self.dtype, device=self.device) * -0.5
    return (self.unsqueeze(-1) + offsets).digamma().sum(-1)


def angle_grad(grad: torch.Tensor, self: torch.Tensor) -> torch.Tensor:
    """Gradient of angle: zero for a real input (angle is piecewise constant); for
    a complex one grad * i z / |z|^2 (d angle = Im(conj(z) dz) / |z|^2), 0 at 0."""
    if not self.is_complex():
        return torch.zeros_like(grad)
    return torch.where(self == 0, 0.0, grad * self * 1j / self.abs().square())


def clamp_tensor_grads(grad, self, min, max) -> tuple:
    """Gradients of clamp.Tensor for (self, min, max), None for an absent bound.
    With both bounds and min > max the result is max; ties go to self."""
    zero = torch.zeros((), dtype=grad.dtype)
    if min is None and max is None:
        return grad, None, None
    if min is not None and max is not None:
        self_mask = (self >= min).logical_and(self <= max)
        min_mask = (self < min).logical_and(min < max)
        max_mask = (self > max).logical_or(max < min)
    else:
        self_mask = self >= min if min is not None else self <= max
        min_mask = self < min if min is not None else None
        max_mask = self > max if max is not None else None
    return (
        unbroadcast(torch.where(self_mask, grad, zero), self),
        None if min is None else unbroadcast(torch.where(min_mask, grad, zero), min),
        None if max is None else unbroadcast(torch.where(max_mask, grad, zero), max),
    )
