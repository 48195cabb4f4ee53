"""Helpers for reductions, scans and sorts.

Sums, means, norms, var/std, logsumexp, prod, amax/amin, max/min/median (full and
along a dim), trace and renorm; the scans cumsum, cumprod, logcumsumexp; and the
sort-like ops (sort, topk, cummax, cummin) that select elements by their indices.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import as_real_like

from .elementwise import unbroadcast

__all__ = [
    "amax_grad",
    "amax_tangent",
    "dist_grad",
    "dist_tangent",
    "evenly_distribute_grad",
    "evenly_read_tangent",
    "expand_reduced",
    "foreach_norm_grads",
    "foreach_norm_tangents",
    "gather_reduced",
    "gather_selected",
    "logsumexp_tangent",
    "logsumexp_weights",
    "mean_tangent",
    "prod_grad",
    "prod_tangent",
    "reduced_numel",
    "renorm_grad",
    "renorm_tangent",
    "reverse_cumsum",
    "scan_grad",
    "scan_tangent",
    "scatter_selected",
    "std_grad",
    "std_tangent",
    "trace_grad",
    "var_grad",
    "var_tangent",
    "vector_norm_grad",
    "vector_norm_tangent",
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


def gather_reduced(
    t: torch.Tensor, dim: int, indices: torch.Tensor, keepdim: bool
) -> torch.Tensor:
    """The elements of `t` that a max/min over `dim` selected (its `indices` output)."""
    if t.dim() == 0:
        return t.clone()
    if keepdim:
        return t.gather(dim, indices)
    return t.gather(dim, indices.unsqueeze(dim)).squeeze(dim)


def _reduce_dims(dim, like: torch.Tensor) -> list[int]:
    """The dims a reduction over `dim` (None or [] for all) sums, [] for a 0-d input."""
    return _dims(dim, like.dim()) if like.dim() else []


def _sum_reduced(t: torch.Tensor, like: torch.Tensor, dim, keepdim: bool):
    dims = _reduce_dims(dim, like)
    if not dims:
        return t.clone() if t.dim() == like.dim() else t.sum()
    return t.sum(dim=dims, keepdim=keepdim)


def _masked_div(num, den):
    return torch.where(den == 0, 0.0, num / torch.where(den == 0, 1.0, den))


def _vector_norm_scaled(self: torch.Tensor, ord, dim, keepdim: bool, result):
    """d ||self||_ord / d self, shaped like self: the gradient of a unit output
    gradient, and (conjugated, real part) the weights of the tangent. Zero where the
    norm is zero, as torch defines it; ties of the inf-norms share equally."""
    p = 2.0 if ord is None else float(ord)
    x = self
    norm = expand_reduced(result.to(x.real.dtype), x, dim, keepdim)
    if p == 0.0:
        return torch.zeros_like(x)
    if p == 1.0:
        return x.sgn()
    if p == 2.0:
        return _masked_div(x, norm)
    if p == float("inf") or p == float("-inf"):
        mask = ((x.abs() == norm) | (x.isnan() & norm.isnan())).to(x.real.dtype)
        count = expand_reduced(_sum_reduced(mask, x, dim, True), x, dim, True)
        return x.sgn() * mask / count
    if p < 2.0:
        scaled = x.sgn() * torch.where(x == 0, 0.0, x.abs().pow(p - 1))
    else:
        scaled = x * x.abs().pow(p - 2)
    return scaled * _masked_div(torch.ones_like(norm), norm.pow(p - 1))


def vector_norm_grad(grad, self, ord, dim, keepdim: bool, result) -> torch.Tensor:
    """Gradient of linalg_vector_norm (and norm, dist) with respect to self."""
    scaled = _vector_norm_scaled(self, ord, dim, keepdim, result)
    return (expand_reduced(grad, self, dim, keepdim) * scaled).to(self.dtype)


def vector_norm_tangent(self_t, self_p, ord, dim, keepdim: bool, result):
    """Tangent of linalg_vector_norm: sum of Re(conj(d norm/d x) * x_t)."""
    scaled = _vector_norm_scaled(self_p, ord, dim, keepdim, result)
    if self_t.shape != self_p.shape:
        self_t = self_t.expand(self_p.shape)
    weighted = as_real_like(scaled.conj() * self_t, result)
    return _sum_reduced(weighted, self_p, dim, keepdim).to(result.dtype)


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


def dist_tangent(t, self_p, other_p, p, result) -> torch.Tensor:
    """Tangent of dist(self, other, p) from the tangent `t` of one input (self's;
    negate for other's): the norm's tangent at self - other."""
    diff = self_p - other_p
    return vector_norm_tangent(t.expand(diff.shape), diff, p, None, False, result)


def dist_grad(grad, self, other, p, result, like) -> torch.Tensor:
    """Gradient of dist(self, other, p) for self (for other: its negation), summed
    to `like`'s shape."""
    diff = self - other
    return unbroadcast(vector_norm_grad(grad, diff, p, None, False, result), like)


def var_tangent(self_t, self_p, dim, correction, keepdim: bool, result):
    """Tangent of var.correction: 2 Re(conj(x - mean) x_t) summed, over the dof."""
    dims = _reduce_dims(dim, self_p)
    centered = self_p - (self_p.mean(dim=dims, keepdim=True) if dims else self_p)
    weighted = as_real_like(centered.conj() * self_t, result)
    weighted = weighted * (2 / _var_dof(self_p, dim, correction))
    return _sum_reduced(weighted, self_p, dim, keepdim)


def var_grad(grad, self, dim, correction, keepdim: bool) -> torch.Tensor:
    """Gradient of var.correction with respect to self."""
    dims = _reduce_dims(dim, self)
    centered = self - (self.mean(dim=dims, keepdim=True) if dims else self)
    return (expand_reduced(grad, self, dim, keepdim) * centered * 2) / _var_dof(
        self, dim, correction
    )


def _var_dof(like, dim, correction):
    c = 1 if correction is None else correction
    return torch.tensor(reduced_numel(like, dim) - c, dtype=like.real.dtype)


def std_tangent(self_t, self_p, dim, correction, keepdim: bool, result):
    """Tangent of std.correction: var's tangent over 2 std (0 where std is 0)."""
    var_t = var_tangent(self_t, self_p, dim, correction, keepdim, result)
    return _masked_div(var_t, 2 * result)


def std_grad(grad, self, dim, correction, keepdim: bool, result) -> torch.Tensor:
    """Gradient of std.correction with respect to self."""
    return var_grad(_masked_div(grad, 2 * result), self, dim, correction, keepdim)


def mean_tangent(self_t, self_p, dim, keepdim: bool):
    """Tangent of a mean over `dim` (None or [] for all), as var_mean's second output."""
    return _sum_reduced(self_t, self_p, dim, keepdim) / reduced_numel(self_p, dim)


def logsumexp_weights(self, dim, keepdim: bool, result) -> torch.Tensor:
    """d logsumexp / d self = exp(self - result), shaped like self."""
    return (self - expand_reduced(result, self, dim, keepdim)).exp()


def logsumexp_tangent(self_t, self_p, dim, keepdim: bool, result):
    """Tangent of logsumexp: the exp(self - result)-weighted sum of self's tangent."""
    w = logsumexp_weights(self_p, dim, keepdim, result)
    weighted = self_t * w
    if weighted.is_complex() == w.is_complex():
        # In w's dtype, as native's in-place product (a float64 tangent of a
        # float32 input gives a float32 tangent).
        weighted = weighted.to(w.dtype)
    return _sum_reduced(weighted, self_p, dim, keepdim)


def reverse_cumsum(grad: torch.Tensor, dim: int) -> torch.Tensor:
    """Gradient of cumsum: sums from the end backwards."""
    if grad.dim() == 0:
        return grad
    return grad.flip(dim).cumsum(dim).flip(dim)


def _scan_partials(x: torch.Tensor, dim: int, kind: str) -> torch.Tensor:
    """Matrix M[..., k, i] = d scan(x)_i / d x_k along `dim` (moved last), 0 for k > i."""
    x = x.movedim(dim, -1)
    n = x.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=x.device).triu()
    if kind == "cumprod":
        eye = torch.eye(n, dtype=torch.bool, device=x.device)
        rows = torch.where(eye, torch.ones_like(x).unsqueeze(-2), x.unsqueeze(-2))
        return torch.where(upper, rows.cumprod(-1), 0.0)
    result = x.logcumsumexp(-1)
    diff = x.unsqueeze(-1) - result.unsqueeze(-2)
    diff = torch.where(upper, diff, -float("inf"))
    both_inf = (x.unsqueeze(-1).real == -float("inf")) & (
        result.unsqueeze(-2).real == -float("inf")
    )
    return torch.where(upper & ~both_inf, diff.exp(), 0.0)


def scan_tangent(self_t, self_p, dim: int, kind: str) -> torch.Tensor:
    """Tangent of cumprod or logcumsumexp (`kind`) along `dim`; exact with zeros."""
    if self_p.dim() == 0:
        return self_t.clone()  # one element: cumprod and logcumsumexp are identity
    m = _scan_partials(self_p, dim, kind)
    t = self_t.movedim(dim, -1)
    return (t.unsqueeze(-1) * m).sum(-2).movedim(-1, dim)


def scan_grad(grad, self, dim: int, kind: str) -> torch.Tensor:
    """Gradient of cumprod or logcumsumexp (`kind`) along `dim`."""
    if self.dim() == 0:
        return grad.to(self.dtype)
    m = _scan_partials(self, dim, kind)
    g = grad.movedim(dim, -1)
    return (g.unsqueeze(-2) * m.conj()).sum(-1).movedim(-1, dim).to(self.dtype)


def _prod_others(self: torch.Tensor, dim) -> torch.Tensor:
    """For each element, the product of the others in its reduction (over `dim`,
    None for all): d prod / d self, exact with zeros."""
    if self.dim() == 0:
        return torch.ones_like(self)
    if dim is None:
        return _prod_others(self.reshape(-1), 0).reshape(self.shape)
    x = self.movedim(dim, -1)
    ones = torch.ones_like(x[..., :1])
    before = torch.cat([ones, x[..., :-1]], -1).cumprod(-1)
    after = torch.cat([x[..., 1:], ones], -1).flip(-1).cumprod(-1).flip(-1)
    return (before * after).movedim(-1, dim)


def prod_tangent(self_t, self_p, dim, keepdim: bool, result) -> torch.Tensor:
    """Tangent of prod (dim None: all elements)."""
    w = _prod_others(self_p.to(result.dtype), dim)
    # Promoted, not cast: a float64 tangent of a float32 input stays float64.
    dtype = torch.promote_types(self_t.dtype, result.dtype)
    return _sum_reduced(self_t.to(dtype) * w, self_p, dim, keepdim)


def prod_grad(grad, self, dim, keepdim: bool) -> torch.Tensor:
    """Gradient of prod (dim None: all elements)."""
    w = _prod_others(self.to(grad.dtype), dim)
    return (expand_reduced(grad, self, dim, keepdim) * w.conj()).to(self.dtype)


def evenly_read_tangent(self_t, self_p, result) -> torch.Tensor:
    """Tangent of a full max/min/median: the mean tangent of the elements equal to
    the result (NaN matches NaN)."""
    mask = (self_p == result) | (self_p.isnan() & result.isnan())
    return (self_t * mask).sum() / mask.sum().clamp(min=1)


def evenly_distribute_grad(grad, self, result) -> torch.Tensor:
    """Gradient of a full max/min/median: shared equally among the elements equal to
    the result (NaN matches NaN)."""
    mask = (self == result) | (self.isnan() & result.isnan())
    return grad * mask / mask.sum().clamp(min=1)


def trace_grad(grad, self) -> torch.Tensor:
    """Gradient of trace: `grad` on the diagonal of a matrix shaped like self."""
    eye = torch.eye(self.shape[0], self.shape[1], dtype=torch.bool, device=self.device)
    return torch.where(eye, grad, 0.0).to(grad.dtype)


def _renorm_factor(self, p, dim: int, maxnorm):
    """renorm's scale per slice along `dim` (keepdim shape), its norm, and the
    dims it reduces."""
    dims = [d for d in range(self.dim()) if d != dim % self.dim()]
    norm = torch.linalg.vector_norm(self, p, dims, keepdim=True)
    over = norm > maxnorm
    factor = torch.where(over, maxnorm / (norm + 1e-7), 1.0)
    return factor, norm, dims, over


def renorm_tangent(self_t, self_p, p, dim: int, maxnorm) -> torch.Tensor:
    """Tangent of renorm: self_t * factor + self * d factor."""
    factor, norm, dims, over = _renorm_factor(self_p, p, dim, maxnorm)
    norm_t = vector_norm_tangent(self_t, self_p, p, dims, True, norm)
    dfactor = torch.where(over, -maxnorm / (norm + 1e-7) ** 2, 0.0) * norm_t
    return self_t * factor + self_p * dfactor


def renorm_grad(grad, self, p, dim: int, maxnorm) -> torch.Tensor:
    """Gradient of renorm with respect to self."""
    factor, norm, dims, over = _renorm_factor(self, p, dim, maxnorm)
    dfactor = torch.where(over, -maxnorm / (norm + 1e-7) ** 2, 0.0)
    inner = as_real_like((grad.conj() * self).sum(dims, keepdim=True), norm)
    if inner.is_complex():
        inner = inner.real
    scaled = _vector_norm_scaled(self, p, dims, True, norm)
    return grad * factor + scaled * (dfactor * inner)


def scatter_selected(grad, self, dim: int, indices) -> torch.Tensor:
    """Gradient of sort/topk/cummax-like ops: `grad` added at the `indices` along
    `dim` that produced each output (0-d: grad itself)."""
    if self.dim() == 0:
        return grad.clone()
    return torch.zeros_like(self, dtype=grad.dtype).scatter_add(dim, indices, grad)


def gather_selected(t, dim: int, indices) -> torch.Tensor:
    """Tangent of sort/topk/cummax-like ops: the elements of `t` at `indices`."""
    if t.dim() == 0:
        return t.clone()
    return t.gather(dim, indices)
