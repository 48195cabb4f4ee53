"""Helpers for reductions, scans and sorts.

Sums, means, norms, var/std, logsumexp, prod, amax/amin, max/min/median (full and
along a dim), trace and renorm; the scans cumsum, cumprod, logcumsumexp; and the
sort-like ops (sort, topk, cummax, cummin) that select elements by their indices.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    amax_mask,
    as_real_like,
    expand_reduced,
    masked_div,
    prod_others,
    reduce_dims,
    renorm_dims,
    renorm_factor,
    scan_partials,
    unbroadcast,
    var_dof,
    vector_norm_scaled,
    vector_norm_tangent,
)

__all__ = [
    "amax_grad",
    "dist_grad",
    "evenly_distribute_grad",
    "foreach_norm_grads",
    "foreach_norm_tangents",
    "prod_grad",
    "renorm_grad",
    "reverse_cumsum",
    "scan_grad",
    "scatter_selected",
    "std_grad",
    "trace_grad",
    "var_grad",
    "vector_norm_grad",
]


def amax_grad(grad, self, result, dim, keepdim: bool) -> torch.Tensor:
    """Gradient of amax/amin: shared equally among the elements that attain it."""
    mask, count = amax_mask(self, result, dim, keepdim)
    return expand_reduced(grad, self, dim, keepdim) * mask / count


def vector_norm_grad(grad, self, ord, dim, keepdim: bool, result) -> torch.Tensor:
    """Gradient of linalg_vector_norm (and norm, dist) with respect to self."""
    scaled = vector_norm_scaled(self, ord, dim, keepdim, result)
    return (expand_reduced(grad, self, dim, keepdim) * scaled).to(self.dtype)


def foreach_norm_tangents(self_t, self_p, ord, result) -> list:
    """Tangents of _foreach_norm: for each tensor of the list, the tangent of its
    vector norm over all its elements (`result`: the norms, in the op's dtype)."""
    return [
        vector_norm_tangent(t, p, ord, None, False, r)
        for t, p, r in zip(self_t, self_p, result)
    ]


def foreach_norm_grads(grads, self, ord, result) -> list:
    """Gradients of _foreach_norm for each tensor of `self`, zeros where a norm has
    no gradient (None in `grads`)."""
    return [
        (
            torch.zeros_like(p)
            if g is None
            else vector_norm_grad(g, p, ord, None, False, r)
        )
        for g, p, r in zip(grads, self, result)
    ]


def dist_grad(grad, self, other, p, result, like) -> torch.Tensor:
    """Gradient of dist(self, other, p) for self (for other: its negation), summed
    to `like`'s shape."""
    diff = self - other
    return unbroadcast(vector_norm_grad(grad, diff, p, None, False, result), like)


def var_grad(grad, self, dim, correction, keepdim: bool) -> torch.Tensor:
    """Gradient of var.correction with respect to self."""
    dims = reduce_dims(dim, self)
    centered = self - (self.mean(dim=dims, keepdim=True) if dims else self)
    return (expand_reduced(grad, self, dim, keepdim) * centered * 2) / var_dof(
        self, dim, correction
    )


def std_grad(grad, self, dim, correction, keepdim: bool, result) -> torch.Tensor:
    """Gradient of std.correction with respect to self."""
    return var_grad(masked_div(grad, 2 * result), self, dim, correction, keepdim)


def reverse_cumsum(grad: torch.Tensor, dim: int) -> torch.Tensor:
    """Gradient of cumsum: sums from the end backwards."""
    if grad.dim() == 0:
        return grad
    return grad.flip(dim).cumsum(dim).flip(dim)


def scan_grad(grad, self, dim: int, kind: str) -> torch.Tensor:
    """Gradient of cumprod or logcumsumexp (`kind`) along `dim`."""
    if self.dim() == 0:
        return grad.to(self.dtype)
    m = scan_partials(self, dim, kind)
    g = grad.movedim(dim, -1)
    return (g.unsqueeze(-2) * m.conj()).sum(-1).movedim(-1, dim).to(self.dtype)


def prod_grad(grad, self, dim, keepdim: bool) -> torch.Tensor:
    """Gradient of prod (dim None: all elements)."""
    w = prod_others(self.to(grad.dtype), dim)
    return (expand_reduced(grad, self, dim, keepdim) * w.conj()).to(self.dtype)


def evenly_distribute_grad(grad, self, result) -> torch.Tensor:
    """Gradient of a full max/min/median: shared equally among the elements equal to
    the result (NaN matches NaN)."""
    mask = (self == result) | (self.isnan() & result.isnan())
    return grad * mask / mask.sum().clamp(min=1)


def trace_grad(grad, self) -> torch.Tensor:
    """Gradient of trace: `grad` on the diagonal of a matrix shaped like self."""
    eye = torch.eye(self.shape[0], self.shape[1], dtype=torch.bool, device=self.device)
    return torch.where(eye, grad, 0.0).to(grad.dtype)


def renorm_grad(grad, self, p, dim: int, maxnorm) -> torch.Tensor:
    """Gradient of renorm with respect to self."""
    scale, norm, over = renorm_factor(self, p, dim, maxnorm)
    dims = renorm_dims(dim, self.dim())
    dfactor = torch.where(over, -maxnorm / (norm + 1e-7) ** 2, 0.0)
    inner = as_real_like((grad.conj() * self).sum(dims, keepdim=True), norm)
    if inner.is_complex():
        inner = inner.real
    scaled = vector_norm_scaled(self, p, dims, True, norm)
    return grad * scale + scaled * (dfactor * inner)


def scatter_selected(grad, self, dim: int, indices) -> torch.Tensor:
    """Gradient of sort/topk/cummax-like ops: `grad` added at the `indices` along
    `dim` that produced each output (0-d: grad itself)."""
    if self.dim() == 0:
        return grad.clone()
    return torch.zeros_like(self, dtype=grad.dtype).scatter_add(dim, indices, grad)
