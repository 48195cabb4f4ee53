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


# ---------------------------------------------------------------- reductions, scans, sorts


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
    return _sum_reduced(self_t * w, self_p, dim, keepdim)


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
    return _sum_reduced(self_t.to(result.dtype) * w, self_p, dim, keepdim)


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


__all__ += [  # reductions, scans, sorts
    "dist_grad",
    "dist_tangent",
    "evenly_distribute_grad",
    "evenly_read_tangent",
    "gather_selected",
    "logsumexp_tangent",
    "logsumexp_weights",
    "mean_tangent",
    "prod_grad",
    "prod_tangent",
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


# ----- helpers for shape, view and indexing ops (part `views`)

__all__ += [
    "cat_grads",
    "gather_grad",
    "narrow_grad",
    "negated",
    "repeat_grad",
    "scatter_reduce_grads",
    "scatter_reduce_tangent",
    "stack_grads",
]


def negated(values: Sequence[int]) -> list[int]:
    """The integers of `values` negated: the padding or shifts that undo a pad or roll."""
    return [-v for v in values]


def narrow_grad(grad, like, dim: int, start, length) -> torch.Tensor:
    """Gradient of `narrow`: `grad` placed in the narrowed positions, zeros elsewhere."""
    out = grad.new_zeros(like.shape)
    out.narrow(dim, start, length).copy_(grad)
    return out


def cat_grads(grads: Sequence, outputs: Sequence[torch.Tensor], dim: int):
    """Gradient of `split`: the pieces' gradients concatenated along `dim`, zeros
    (shaped like the piece in `outputs`) for pieces without one."""
    return torch.cat(
        [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs)],
        dim,
    )


def stack_grads(grads: Sequence, like: torch.Tensor, outputs: Sequence, dim: int):
    """Gradient of `unbind`: the slices' gradients stacked along `dim`, zeros
    (shaped like the slice in `outputs`) for slices without one."""
    if len(outputs) == 0:
        return like.new_zeros(like.shape)
    return torch.stack(
        [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs)],
        dim,
    )


def repeat_grad(grad, like, repeats: Sequence[int]) -> torch.Tensor:
    """Gradient of `repeat`: the gradients of all copies of each element summed."""
    n = len(repeats)
    if n == 0:
        return grad.clone()
    sizes = [1] * (n - like.dim()) + list(like.shape)
    split = []
    for r, s in zip(repeats, sizes):
        split += [r, s]
    return grad.reshape(split).sum(dim=list(range(0, 2 * n, 2))).reshape(like.shape)


def _fit(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`t` in the leading corner of a zero tensor shaped like `like` (for an `index`
    smaller than `src` in scatter: the rest of `src` is not read)."""
    if t.shape == like.shape:
        return t
    out = t.new_zeros(like.shape)
    corner = out
    for d, n in enumerate(t.shape):
        corner = corner.narrow(d, 0, n)
    corner.copy_(t)
    return out


def gather_grad(grad, dim: int, index, like) -> torch.Tensor:
    """Gradient of scatter for `src`: the elements of `grad` that `index` wrote,
    shaped like `like` (zeros where `src` was not read)."""
    if grad.dim() == 0 and index.dim() == 0:
        return grad.clone().reshape(like.shape)
    return _fit(grad.gather(dim, index), like)


def _scatter_count(self, dim: int, index, include_self: bool) -> torch.Tensor:
    """How many values scatter_reduce combines at each position of `self`."""
    start = torch.ones_like(self) if include_self else torch.zeros_like(self)
    return start.scatter_add(dim, index, torch.ones_like(index, dtype=self.dtype))


def _scatter_touched(self, dim: int, index) -> torch.Tensor:
    """Where `index` writes into `self` (bool)."""
    hit = torch.zeros_like(self, dtype=torch.bool)
    return hit.scatter(dim, index, True)


def _src_read(src, index) -> torch.Tensor:
    """The part of `src` that scatter reads (its leading corner shaped like `index`)."""
    for d, n in enumerate(index.shape):
        src = src.narrow(d, 0, n)
    return src


def _extreme_weights(self, dim, index, src, reduce, include_self, result):
    """For amax/amin: the weight of each self and src element in the result (1/N for
    each of the N elements attaining it, 0 otherwise)."""
    touched = _scatter_touched(self, dim, index)
    self_hit = self == result
    if not include_self:
        self_hit = self_hit & ~touched
    src_hit = _src_read(src, index) == result.gather(dim, index)
    count = self_hit.to(self.dtype).scatter_add(dim, index, src_hit.to(self.dtype))
    count = count.masked_fill(count == 0, 1)
    return self_hit / count, src_hit / count.gather(dim, index)


def scatter_reduce_grads(
    grad, self, dim: int, index, src, reduce: str, include_self: bool, result
):
    """Gradients of scatter_reduce (sum, mean, amax, amin) for `self` and `src`.

    amax/amin share the gradient equally among the elements attaining the result.
    """
    touched = _scatter_touched(self, dim, index)
    if reduce == "sum":
        self_grad = grad if include_self else grad.masked_fill(touched, 0)
        src_grad = grad.gather(dim, index)
    elif reduce == "mean":
        count = _scatter_count(self, dim, index, include_self)
        share = grad / count.masked_fill(count == 0, 1)
        self_grad = share if include_self else share.masked_fill(touched, 0)
        src_grad = share.gather(dim, index)
    elif reduce in ("amax", "amin"):
        self_w, src_w = _extreme_weights(
            self, dim, index, src, reduce, include_self, result
        )
        self_grad = grad * self_w
        src_grad = grad.gather(dim, index) * src_w
    else:
        raise NotImplementedError(
            f"scatter_reduce: no derivative for reduce={reduce!r}"
        )
    return self_grad, _fit(src_grad, src)


def scatter_reduce_tangent(
    self_t,
    self_p,
    dim: int,
    index,
    src_t,
    src_p,
    reduce: str,
    include_self: bool,
    result,
):
    """Tangent of scatter_reduce (sum, mean, amax, amin); linear in self_t, src_t."""
    if reduce in ("sum", "mean"):
        return self_t.scatter_reduce(
            dim, index, src_t, reduce, include_self=include_self
        )
    if reduce in ("amax", "amin"):
        self_w, src_w = _extreme_weights(
            self_p, dim, index, src_p, reduce, include_self, result
        )
        return (self_t * self_w).scatter_add(
            dim, index, _src_read(src_t, index) * src_w
        )
    raise NotImplementedError(f"scatter_reduce: no derivative for reduce={reduce!r}")


# ----- helpers for element-wise ops (part `elementwise`)

__all__ += [
    "angle_grad",
    "angle_tangent",
    "clamp_tensor_grads",
    "clamp_tensor_weight",
    "logit_derivative",
    "mvlgamma_derivative",
    "unless_rounded",
]


def mvlgamma_derivative(self: torch.Tensor, p: int) -> torch.Tensor:
    """d mvlgamma(self, p) / d self: the sum of digamma(self - i / 2) over i < p."""
    offsets = torch.arange(p, dtype=self.dtype, device=self.device) * -0.5
    return (self.unsqueeze(-1) + offsets).digamma().sum(-1)


def logit_derivative(self: torch.Tensor, eps) -> torch.Tensor:
    """d logit(self, eps) / d self = 1 / (self (1 - self)); with eps, 0 outside
    [eps, 1 - eps] (where logit clamps); without, NaN outside [0, 1], as torch."""
    derivative = (self * (1 - self)).reciprocal()
    if eps is None:
        return torch.where((self < 0).logical_or(self > 1), float("nan"), derivative)
    return torch.where((self < eps).logical_or(self > 1 - eps), 0.0, derivative)


def angle_grad(grad: torch.Tensor, self: torch.Tensor) -> torch.Tensor:
    """Gradient of angle: zero for a real input (angle is piecewise constant); for
    a complex one grad * i z / |z|^2 (d angle = Im(conj(z) dz) / |z|^2), 0 at 0."""
    if not self.is_complex():
        return torch.zeros_like(grad)
    return torch.where(self == 0, 0.0, grad * self * 1j / self.abs().square())


def angle_tangent(self_t: torch.Tensor, self_p: torch.Tensor) -> torch.Tensor:
    """Tangent of angle: Im(conj(z) z_t) / |z|^2 (0 at 0); zero for a real input."""
    if not self_p.is_complex():
        return torch.zeros_like(self_t)
    return torch.where(
        self_p == 0, 0.0, (self_p.conj() * self_t).imag / self_p.abs().square()
    )


def unless_rounded(t: torch.Tensor, rounding_mode) -> torch.Tensor:
    """`t` for true division (rounding_mode None), else zeros: a rounded quotient
    (trunc, floor) is piecewise constant."""
    return t if rounding_mode is None else torch.zeros_like(t)


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


def clamp_tensor_weight(self_p, min_p, max_p, which: str) -> torch.Tensor:
    """Where clamp.Tensor's result took `which` ("self", "min" or "max"): a mask
    to weight that input's tangent by (max wins where min > max; an absent bound
    never does)."""
    if min_p is not None and max_p is not None:
        crossed = min_p > max_p
        below = (self_p < min_p).logical_and(crossed.logical_not())
        above = (self_p > max_p).logical_and(below.logical_not())
        masks = {
            "self": crossed.logical_or(below).logical_or(above).logical_not(),
            "min": below,
            "max": crossed.logical_or(above),
        }
    elif min_p is not None:
        masks = {"self": self_p > min_p}
        masks["min"] = masks["self"].logical_not()
    elif max_p is not None:
        masks = {"self": self_p < max_p}
        masks["max"] = masks["self"].logical_not()
    else:
        masks = {"self": torch.ones_like(self_p, dtype=torch.bool)}
    return masks[which]


# ---------------------------------------------------------------- nn (normalization, losses, dropout)

__all__ += [  # nn
    "apply_loss_reduction",
    "batch_norm_tangent",
    "batch_norm_xhat",
    "bce_self_derivative",
    "bce_target_derivative",
    "channel_view",
    "dropout_scale",
    "expand_loss_grad",
    "group_norm_tangent",
    "group_norm_xhat",
    "layer_norm_tangent",
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
    # d((x - mean) * rstd) = rstd * (dx - mean(dx) - xhat * mean(xhat * dx)).
    return rstd * (
        input_t
        - input_t.mean(dims, keepdim=True)
        - xhat * (xhat * input_t).mean(dims, keepdim=True)
    )


def _times_weight(t, weight, ndim: int | None = None):
    if weight is None:
        return t
    return t * (weight if ndim is None else channel_view(weight, ndim))


def layer_norm_tangent(input_t, input_p, weight, mean, rstd, normalized_shape):
    """Tangent of native_layer_norm's output from the input's tangent (times the
    weight when there is one); `mean`, `rstd` are its saved statistics."""
    dims = list(range(-len(normalized_shape), 0))
    xhat = (input_p - mean) * rstd
    return _times_weight(_normalized_tangent(input_t, xhat, rstd, dims), weight)


def _batch_norm_stats(
    input_p, running_mean, running_var, save_mean, save_invstd, training, eps
):
    ndim = input_p.dim()
    if training:
        return channel_view(save_mean, ndim), channel_view(save_invstd, ndim)
    return (
        channel_view(running_mean, ndim),
        channel_view((running_var + eps).rsqrt(), ndim),
    )


def batch_norm_xhat(
    input_p, running_mean, running_var, save_mean, save_invstd, training, eps
):
    """native_batch_norm's normalized input (before weight and bias)."""
    mean, invstd = _batch_norm_stats(
        input_p, running_mean, running_var, save_mean, save_invstd, training, eps
    )
    return (input_p - mean) * invstd


def batch_norm_tangent(
    input_t,
    input_p,
    weight,
    running_mean,
    running_var,
    save_mean,
    save_invstd,
    training,
    eps,
):
    """Tangent of native_batch_norm's output from the input's tangent (times the
    weight when there is one): batch statistics in training, running ones in eval."""
    mean, invstd = _batch_norm_stats(
        input_p, running_mean, running_var, save_mean, save_invstd, training, eps
    )
    if training:
        dims = [0] + list(range(2, input_p.dim()))
        t = _normalized_tangent(input_t, (input_p - mean) * invstd, invstd, dims)
    else:
        t = input_t * invstd
    return _times_weight(t, weight, input_p.dim())


def group_norm_xhat(input_p, mean, rstd, group: int):
    """native_group_norm's normalized input (before weight and bias)."""
    x = input_p.reshape(_group_shape(input_p, group))
    return ((x - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(input_p.shape)


def _group_shape(t: torch.Tensor, group: int) -> list[int]:
    # [N, group, C / group * HxW], written out so that empty inputs reshape too.
    return [t.shape[0], group, t.shape[1:].numel() // group]


def group_norm_tangent(input_t, input_p, weight, mean, rstd, group: int):
    """Tangent of native_group_norm's output from the input's tangent (times the
    weight when there is one); `mean`, `rstd` ([N, group]) its saved statistics."""
    shape = _group_shape(input_p, group)
    xhat = (input_p.reshape(shape) - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)
    t = _normalized_tangent(
        input_t.reshape(shape), xhat, rstd.unsqueeze(-1), [-1]
    ).reshape(input_p.shape)
    return _times_weight(t, weight, input_p.dim())


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


__all__ += ["block_diag_grads"]


def block_diag_grads(grad: torch.Tensor, tensors: Sequence[torch.Tensor]) -> list:
    """Gradient of `block_diag`: each input's diagonal block of `grad` (a 0-d input
    is a 1x1 block, a 1-d one a single row), in the input's shape."""
    pieces = []
    row = col = 0
    for t in tensors:
        rows, cols = (
            (1, 1) if t.dim() == 0 else (1, t.shape[0]) if t.dim() == 1 else t.shape
        )
        block = grad[row : row + rows, col : col + cols]
        pieces.append(as_real_like(block, t).reshape(t.shape).to(t.dtype))
        row += rows
        col += cols
    return pieces


__all__ += [
    "group_norm_backward",
    "group_norm_mean_tangent",
    "group_norm_rstd_tangent",
]


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


__all__ += ["fft_c2r_grad", "fft_r2c_grad"]  # fft


def fft_r2c_grad(grad, self, dim, normalization: int, onesided: bool):
    """Gradient of `_fft_r2c` (real signal -> complex spectrum) at real `self`.

    The op is the DFT over `dim` (scaled by `normalization`), keeping only the
    first n // 2 + 1 bins of dim[-1] when `onesided`. Its adjoint zero-pads the
    spectrum's gradient back to n bins along dim[-1] (the dropped bins have no
    gradient), applies the adjoint DFT (an inverse c2c with the same
    normalization), and keeps the real part (the input is real)."""
    if onesided:
        last = dim[-1] % grad.dim()
        missing = self.shape[last] - grad.shape[last]
        if missing > 0:
            shape = list(grad.shape)
            shape[last] = missing
            grad = torch.cat([grad, grad.new_zeros(shape)], last)
    return torch.ops.aten._fft_c2c(grad, dim, normalization, False).real


def fft_c2r_grad(grad, dim, normalization: int):
    """Gradient of `_fft_c2r` (Hermitian half spectrum -> real signal of n
    samples, n = grad.shape[dim[-1]]) at its complex input.

    c2r reads its input h as the half spectrum of a Hermitian-symmetric one: each
    bin k of 0 < k < n / 2 stands for itself and for the mirrored bin n - k
    (conj h[k]), while the DC bin and, for even n, the Nyquist bin stand alone
    (c2r ignores their imaginary parts). So the output is Re(A h), A the inverse
    DFT with those interior columns doubled, and the gradient is A^H grad: the
    onesided forward DFT (r2c, same normalization) of `grad`, with the interior
    bins doubled. The DC/Nyquist gradients come out real, as they should."""
    spectrum = torch.ops.aten._fft_r2c(grad, dim, normalization, True)
    last = dim[-1] % grad.dim()
    n, half = grad.shape[last], spectrum.shape[last]
    weight = torch.ones(half, dtype=grad.dtype, device=grad.device)
    weight[1 : 1 + n - half] = 2  # bins 1 .. (n - 1) // 2
    return spectrum * weight.reshape([half] + [1] * (grad.dim() - 1 - last))
