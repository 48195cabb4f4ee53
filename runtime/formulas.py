"""Helpers that derivative formulas may call by name (the spec's one helper module).

Every public function here is listed in `__all__`; the generator checks formula
calls against that list, and generated kernels import what they use. Each helper is
a plain function of tensors and Python values, linear in any tangent it receives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "amax_grad",
    "amax_tangent",
    "as_real_like",
    "as_strided_grad",
    "clamp_mask",
    "conform",
    "expand_reduced",
    "fill_absent",
    "gather_reduced",
    "inverse_permutation",
    "pow_exponent_derivative",
    "pow_self_derivative",
    "reduced_numel",
    "scale",
    "scale_conj",
    "slice_grad",
    "split_like",
    "unbroadcast",
    "winner_weight",
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


def unbroadcast(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Sum `grad` down to `like`'s shape (undoing broadcasting), and take its real
    part when `like` is real and `grad` complex (a real input's gradient is real)."""
    if grad.shape != like.shape:
        grad = grad.sum_to_size(like.shape)
    return as_real_like(grad, like)


def as_real_like(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The real part of `t` when `like` is real and `t` complex, else `t`."""
    if t.is_complex() and not like.is_complex():
        return t.real
    return t


def conform(tangent: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """Give a tangent its primal's shape (in the primal's layout).

    Generated kernels call this where a term was dropped for an absent tangent, so
    the remaining term may have an input's shape rather than the broadcast output's.
    The tangent keeps its dtype, as in native forward AD (its real part where the
    output is real).
    """
    tangent = as_real_like(tangent, result)
    if tangent.shape == result.shape:
        return tangent
    return torch.empty_like(result, dtype=tangent.dtype).copy_(tangent)


def fill_absent(
    tangents: Sequence[torch.Tensor | None], primals: Sequence[torch.Tensor | None]
) -> list[torch.Tensor | None]:
    """Zeros in place of the absent tangents of a tensor list (needed by `cat`)."""
    return [
        torch.zeros_like(p) if t is None and p is not None else t
        for t, p in zip(tangents, primals)
    ]


def _dims(dim, ndim: int) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return sorted(d % ndim if ndim else 0 for d in dim)


def expand_reduced(
    grad: torch.Tensor, like: torch.Tensor, dim, keepdim: bool
) -> torch.Tensor:
    """Broadcast the gradient of a reduction over `dim` back to the input's shape."""
    if not keepdim and like.dim() > 0:
        for d in _dims(dim, like.dim()):
            grad = grad.unsqueeze(d)
    return grad.expand(like.shape)


def reduced_numel(like: torch.Tensor, dim) -> int:
    """How many elements a reduction over `dim` averages (for mean's derivative)."""
    count = 1
    for d in _dims(dim, like.dim()):
        count *= like.shape[d] if like.dim() else 1
    return count


def _amax_mask(self: torch.Tensor, result: torch.Tensor, dim, keepdim: bool):
    mask = self == expand_reduced(result, self, dim, keepdim)
    count = mask.sum(dim=_dims(dim, self.dim()) if self.dim() else [], keepdim=True)
    return mask, count


def amax_grad(grad, self, result, dim, keepdim: bool) -> torch.Tensor:
    """Gradient of amax/amin: shared equally among the elements that attain it."""
    mask, count = _amax_mask(self, result, dim, keepdim)
    return expand_reduced(grad, self, dim, keepdim) * mask / count


def amax_tangent(self_t, self_p, result, dim, keepdim: bool) -> torch.Tensor:
    """Tangent of amax/amin: the mean tangent of the elements that attain it."""
    mask, count = _amax_mask(self_p, result, dim, keepdim)
    dims = _dims(dim, self_p.dim()) if self_p.dim() else []
    return (self_t * mask).sum(dim=dims, keepdim=keepdim) / (
        count if keepdim or not dims else count.squeeze(dims)
    )


def inverse_permutation(dims: Sequence[int]) -> list[int]:
    """The permutation that undoes `permute(dims)`."""
    ndim = len(dims)
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[d % ndim] = i
    return inverse


def slice_grad(grad, like, dim: int, start, end, step: int) -> torch.Tensor:
    """Gradient of `slice`: `grad` placed in the sliced positions, zeros elsewhere."""
    out = grad.new_zeros(like.shape)
    torch.ops.aten.slice.Tensor(out, dim, start, end, step).copy_(grad)
    return out


def split_like(grad: torch.Tensor, tensors: Sequence[torch.Tensor], dim: int) -> list:
    """Gradient of `cat`: `grad` split back into pieces shaped like `tensors`.

    Like `cat`, skips legacy 1-d empty tensors, which take no part along `dim`.
    """
    pieces = []
    offset = 0
    for t in tensors:
        if t.dim() == 1 and t.shape[0] == 0 and grad.dim() != 1:
            pieces.append(grad.new_zeros(t.shape))
            continue
        size = t.shape[dim]
        pieces.append(grad.narrow(dim, offset, size))
        offset += size
    return pieces


def winner_weight(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """d maximum(a, b) / d a: 1 where a wins, 1/2 at ties, 0 where b wins."""
    return (a > b).to(torch.result_type(a, b)) + 0.5 * (a == b)


def pow_self_derivative(self: torch.Tensor, exponent) -> torch.Tensor:
    """d self**exponent / d self = exponent * self**(exponent - 1), 0 where exponent is 0."""
    derivative = exponent * self.pow(exponent - 1)
    if isinstance(exponent, torch.Tensor):
        return torch.where(exponent == 0, 0.0, derivative)
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


def clamp_mask(self: torch.Tensor, min, max) -> torch.Tensor:
    """d clamp(self, min, max) / d self: 1 inside [min, max] (bounds included), 0 outside."""
    mask = torch.ones_like(self, dtype=torch.bool)
    if min is not None:
        mask = mask & (self >= min)
    if max is not None:
        mask = mask & (self <= max)
    return mask


def gather_reduced(
    t: torch.Tensor, dim: int, indices: torch.Tensor, keepdim: bool
) -> torch.Tensor:
    """The elements of `t` that a max/min over `dim` selected (its `indices` output)."""
    if t.dim() == 0:
        return t.clone()
    if keepdim:
        return t.gather(dim, indices)
    return t.gather(dim, indices.unsqueeze(dim)).squeeze(dim)


def as_strided_grad(grad, like, size, stride, storage_offset) -> torch.Tensor:
    """Gradient of `as_strided` for a view that does not overlap itself: `grad`
    placed where the view reads `like`'s storage, zeros elsewhere."""
    offset = like.storage_offset() if storage_offset is None else storage_offset
    flat = grad.new_zeros(like.untyped_storage().nbytes() // like.element_size())
    flat.as_strided(size, stride, offset).copy_(grad)
    return flat.as_strided(like.size(), like.stride(), like.storage_offset()).clone()
