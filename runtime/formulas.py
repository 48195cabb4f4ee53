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
    "copy_broadcast",
    "expand_reduced",
    "fill_absent",
    "gather_reduced",
    "inverse_permutation",
    "pow_exponent_derivative",
    "pow_self_derivative",
    "reduced_numel",
    "scale",
    "scale_conj",
    "sgn_derivative",
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


def copy_broadcast(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A copy of `t` broadcast to `like`'s shape: a tensor of its own where no
    broadcasting is needed (native's copy_ tangent is no view then), else an
    expanded view of the copy."""
    copy = t.clone()
    return copy if copy.shape == like.shape else copy.expand_as(like)


def as_real_like(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The real part of `t` when `like` is real and `t` complex, else `t`."""
    if t.is_complex() and not like.is_complex():
        return t.real
    return t


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
    if tangent.shape == result.shape:
        return tangent
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


__all__ += [  # nn2
    "as_strided_scatter_grads",
    "bce_logits_self_derivative",
    "bce_logits_target_derivative",
    "trilinear_grads",
]


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


def as_strided_scatter_grads(grad, result, size, stride, storage_offset) -> tuple:
    """Gradients of `as_strided_scatter` (self, src). The op writes src into an
    as_strided view of a copy of self, so `size`, `stride` and `storage_offset` are
    read in `result`'s layout: `grad` is laid out like `result`, then src gets the
    view of it and self the rest (zeros where src was written)."""
    g = torch.empty_strided(
        result.size(), result.stride(), dtype=grad.dtype, device=grad.device
    )
    g.copy_(grad)
    offset = 0 if storage_offset is None else storage_offset
    src_grad = g.as_strided(size, stride, offset).clone()
    g.as_strided(size, stride, offset).zero_()
    return g, src_grad


__all__ += [  # linalg: decompositions (part linalg2)
    "eig_grad",
    "eig_tangents",
    "eigh_grad",
    "eigh_tangents",
    "lstsq_b_tangent",
    "lstsq_grads",
    "lstsq_residuals_tangent",
    "lstsq_self_tangent",
    "pinv_grad",
    "pinv_tangent",
    "qr_grad",
    "qr_tangents",
    "svd_grad",
    "svd_tangents",
]


def _offdiag(x: torch.Tensor) -> torch.Tensor:
    """`x` with its (batched) diagonal set to zero."""
    return x - torch.diag_embed(x.diagonal(0, -2, -1))


def _gaps(values: torch.Tensor) -> torch.Tensor:
    """E[..., i, j] = values[j] - values[i], with ones on the diagonal (so that
    dividing an off-diagonal matrix by it leaves the diagonal alone)."""
    k = values.shape[-1]
    eye = torch.eye(k, dtype=values.dtype, device=values.device)
    return values.unsqueeze(-2) - values.unsqueeze(-1) + eye


def _svd_factors(A, U, S, Vh, full_matrices: bool, compute_uv: bool):
    """The thin factors (U with k columns, Vh with k rows, k = min(m, n)) of an SVD
    output; recomputed when the op ran with compute_uv=False (svdvals)."""
    if not compute_uv:
        U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    k = S.shape[-1]
    if full_matrices:
        U, Vh = U[..., :k], Vh[..., :k, :]
    return U, S, Vh


def svd_tangents(A_t, A_p, U, S, Vh, full_matrices: bool, compute_uv: bool):
    """Tangents (dU, dS, dVh) of `_linalg_svd` (A = U diag(S) Vh) for the tangent
    A_t, in the gauge native forward AD uses.

    With dP = U^H dA V (k x k): dS = Re diag(dP); off the diagonal
    U^H dU = (dP S + S dP^H) / E and V^H dV = (S dP + dP^H S) / E, with
    E_ij = s_j^2 - s_i^2. The phase of each complex singular pair is split evenly:
    diag(U^H dU) = -diag(V^H dV) = i Im(diag dP) / (2 S). For m > n (m < n) U (V)
    also moves off its span by (I - U U^H) dA V S^-1 ((I - V V^H) dA^H U S^-1).
    With full_matrices the extra columns of U (rows of Vh) get zero tangents;
    without compute_uv only dS is returned (dU, dVh empty like U, Vh)."""
    U0, Vh0 = U, Vh
    U, S, Vh = _svd_factors(A_p, U, S, Vh, full_matrices, compute_uv)
    V = Vh.mH
    m, n = A_t.shape[-2], A_t.shape[-1]
    dP = U.mH @ (A_t @ V) if m >= n else (U.mH @ A_t) @ V
    dS = dP.diagonal(0, -2, -1).real
    if not compute_uv:
        return torch.zeros_like(U0), dS, torch.zeros_like(Vh0)
    E = _gaps(S * S)
    off = _offdiag(dP)
    dU = U @ ((off * S.unsqueeze(-2) + S.unsqueeze(-1) * off.mH) / E)
    dV = V @ ((S.unsqueeze(-1) * off + off.mH * S.unsqueeze(-2)) / E)
    if dP.is_complex():
        phase = 0.5j * dP.diagonal(0, -2, -1).imag / S
        dU = dU + U * phase.unsqueeze(-2)
        dV = dV - V * phase.unsqueeze(-2)
    if m > n:
        X = A_t @ (V / S.unsqueeze(-2))
        dU = dU + X - U @ (U.mH @ X)
    elif m < n:
        X = A_t.mH @ (U / S.unsqueeze(-2))
        dV = dV + X - V @ (Vh @ X)
    dVh = dV.mH
    if full_matrices:
        dU = torch.cat([dU, dU.new_zeros(U0.shape[:-1] + (m - dU.shape[-1],))], -1)
        pad = Vh0.shape[:-2] + (n - dVh.shape[-2], n)
        dVh = torch.cat([dVh, dVh.new_zeros(pad)], -2)
    return dU, dS, dVh


def svd_grad(grad_U, grad_S, grad_Vh, A, U, S, Vh, full_matrices: bool, compute_uv):
    """Gradient of `_linalg_svd` at A: the adjoint of `svd_tangents`.

    gA = U gP V^H with gP = diag(gS) + (skew(U^H gU) / E) S + S (skew(V^H gV) / E)
    (skew(X) = X - X^H, E as in svd_tangents) plus, for complex A, the diagonal
    i (Im diag(U^H gU) - Im diag(V^H gV)) / (2 S); for m > n add
    (I - U U^H) gU S^-1 V^H, for m < n add U S^-1 gVh (I - V V^H). Gradients of
    the extra columns of a full_matrices U (rows of Vh) are ignored."""
    U, S, Vh = _svd_factors(A, U, S, Vh, full_matrices, compute_uv)
    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    gP = torch.diag_embed(grad_S.to(A.dtype))
    if compute_uv:
        gU, gVh = grad_U[..., :k], grad_Vh[..., :k, :]
        UhgU, VhgV = U.mH @ gU, Vh @ gVh.mH
        E = _gaps(S * S)
        gP = gP + _offdiag(
            (UhgU - UhgU.mH) / E * S.unsqueeze(-2)
            + S.unsqueeze(-1) * ((VhgV - VhgV.mH) / E)
        )
        if A.is_complex():
            imag = UhgU.diagonal(0, -2, -1).imag - VhgV.diagonal(0, -2, -1).imag
            gP = gP + torch.diag_embed(0.5j * imag / S)
        gA = U @ gP @ Vh
        if m > n:
            X = gU / S.unsqueeze(-2)
            gA = gA + (X - U @ (U.mH @ X)) @ Vh
        elif m < n:
            X = gVh / S.unsqueeze(-1)
            gA = gA + U @ (X - (X @ Vh.mH) @ Vh)
        return gA
    return U @ gP @ Vh


def _eigh_vectors(A, L, V, compute_v: bool):
    if compute_v:
        return L, V
    return torch.linalg.eigh(A)


def eigh_tangents(A_t, A_p, L, V, compute_v: bool):
    """Tangents (dL, dV) of `_linalg_eigh` (A = V diag(L) V^H) for the tangent
    A_t, taken as given (like native forward AD, which does not symmetrise it):
    with X = V^H dA V, dL = Re diag(X), dV = V (X / E) off the diagonal,
    E_ij = L_j - L_i (so diag(V^H dV) = 0). Without compute_v, dV is empty like V
    (and V is recomputed to get dL)."""
    V0 = V
    L, V = _eigh_vectors(A_p, L, V, compute_v)
    X = V.mH @ A_t @ V
    dL = X.diagonal(0, -2, -1).real
    if not compute_v:
        return dL, torch.zeros_like(V0)
    return dL, V @ (_offdiag(X) / _gaps(L))


def eigh_grad(grad_L, grad_V, A, L, V, compute_v: bool):
    """Gradient of `_linalg_eigh` at A: the Hermitian part of the adjoint of
    `eigh_tangents` (the gradient native autograd returns), with K = V^H gV:
    V (diag(gL) + ((K - K^H) / (2 E)) off the diagonal) V^H."""
    L, V = _eigh_vectors(A, L, V, compute_v)
    gX = torch.diag_embed(grad_L.to(V.dtype))
    if compute_v:
        K = V.mH @ grad_V
        gX = gX + _offdiag(K - K.mH) / (2 * _gaps(L))
    return V @ gX @ V.mH


def eig_tangents(self_t, L, V):
    """Tangents (dL, dV) of `linalg_eig` (A V = V diag(L), unit-norm columns) for
    the tangent self_t, in the gauge of native forward AD.

    With X = V^-1 dA V: dL = diag(X); dV = V Y - V Re(diag(V^H V Y)), where
    Y = X / E off the diagonal (E_ij = L_j - L_i) and zero on it; the correction
    keeps the columns at unit norm (Re(v_i^H dv_i) = 0)."""
    X = torch.linalg.solve(V, self_t.to(V.dtype) @ V)
    dV = V @ (_offdiag(X) / _gaps(L))
    dV = dV - V * (V.mH @ dV).diagonal(0, -2, -1).real.unsqueeze(-2)
    return X.diagonal(0, -2, -1), dV


def eig_grad(grad_L, grad_V, self, L, V):
    """Gradient of `linalg_eig` at self, the adjoint of `eig_tangents`:
    V^-H (diag(gL) + (V^H g / conj(E)) off the diagonal) V^H with
    g = gV - V Re(diag(V^H gV)); its real part for a real input."""
    VhgV = V.mH @ grad_V
    g = VhgV - (V.mH @ V) * VhgV.diagonal(0, -2, -1).real.unsqueeze(-2)
    gX = torch.diag_embed(grad_L) + _offdiag(g) / _gaps(L).conj()
    gA = torch.linalg.solve(V.mH, gX @ V.mH)
    return as_real_like(gA, self)


def _qr_check(Q, R, mode: str) -> None:
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when "
            "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
            "differentiate through linalg.qr."
        )
    if Q.shape[-2] > R.shape[-1] and mode == "complete":
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and "
            "nrows > ncols."
        )


def qr_tangents(A_t, Q, R, mode: str):
    """Tangents (dQ, dR) of `linalg_qr` (A = QR, diag(R) real) for A_t.

    For m >= n: with D = dA R^-1 and C = Q^H D, Q^H dQ is the skew-Hermitian
    Om = tril(C, -1) - tril(C, -1)^H + i Im diag(C) (dR R^-1 = C - Om is upper
    triangular with a real diagonal), so dR = (C - Om) R and
    dQ = Q Om + (I - Q Q^H) D. For m < n, A = [X | Y] with X square: (dQ, dR1)
    from X, dR2 = Q^H (dY - dQ R2)."""
    _qr_check(Q, R, mode)
    m, n = A_t.shape[-2], A_t.shape[-1]
    if m < n:
        dQ, dR1 = qr_tangents(A_t[..., :m], Q, R[..., :m], mode)
        dR2 = Q.mH @ (A_t[..., m:] - dQ @ R[..., m:])
        return dQ, torch.cat([dR1, dR2], -1)
    D = torch.linalg.solve_triangular(R, A_t, upper=True, left=False)
    C = Q.mH @ D
    low = C.tril(-1)
    Om = low - low.mH
    if C.is_complex():
        Om = Om + torch.diag_embed(1j * C.diagonal(0, -2, -1).imag)
    dR = (C - Om) @ R
    dQ = Q @ Om + D - Q @ (Q.mH @ D)
    return dQ, dR


def qr_grad(grad_Q, grad_R, A, Q, R, mode: str):
    """Gradient of `linalg_qr` at A, the adjoint of `qr_tangents`. For m >= n, with
    M = Q^H gQ - gR R^H: gA = (Q gC + (I - Q Q^H) gQ) R^-H where
    gC = gR R^H + tril(M - M^H, -1) + i Im diag(M). For m < n, A = [X | Y]:
    gY = Q gR2 and gX is that of the square part with gQ - Q gR2 R2^H."""
    _qr_check(Q, R, mode)
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        gR2 = grad_R[..., m:]
        gQ = grad_Q - Q @ (gR2 @ R[..., m:].mH)
        gX = qr_grad(gQ, grad_R[..., :m], A[..., :m], Q, R[..., :m], mode)
        return torch.cat([gX, Q @ gR2], -1)
    M = Q.mH @ grad_Q - grad_R @ R.mH
    gC = grad_R @ R.mH + (M - M.mH).tril(-1)
    if M.is_complex():
        gC = gC + torch.diag_embed(1j * M.diagonal(0, -2, -1).imag)
    G = Q @ gC + grad_Q - Q @ (Q.mH @ grad_Q)
    return torch.linalg.solve_triangular(R.mH, G, upper=False, left=False)


def pinv_tangent(A_t, A_p, pinv):
    """Tangent of the pseudo-inverse P = pinv(A) (of constant rank) for A_t:
    -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P."""
    dAh = A_t.mH
    return (
        -pinv @ A_t @ pinv
        + (pinv @ pinv.mH) @ (dAh - (dAh @ A_p) @ pinv)
        + (dAh - pinv @ (A_p @ dAh)) @ (pinv.mH @ pinv)
    )


def pinv_grad(grad, A, pinv):
    """Gradient of P = pinv(A), the adjoint of `pinv_tangent`:
    -P^H g P^H + (I - A P) g^H P P^H + P^H P g^H (I - P A)."""
    gh = grad.mH
    return (
        -pinv.mH @ grad @ pinv.mH
        + (gh - A @ (pinv @ gh)) @ (pinv @ pinv.mH)
        + (pinv.mH @ pinv) @ (gh - (gh @ pinv) @ A)
    )


def _as_matrix(b, A):
    """b as a matrix: `linalg_lstsq` takes a vector right side when b has one
    dimension less than A."""
    return b.unsqueeze(-1) if b.dim() == A.dim() - 1 else b


def lstsq_self_tangent(self_t, self_p, b_p):
    """Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of A:
    d(pinv A) B (see pinv_tangent)."""
    pinv = torch.linalg.pinv(self_p)
    B = _as_matrix(b_p, self_p)
    X = pinv_tangent(self_t, self_p, pinv) @ B
    return X.squeeze(-1) if B is not b_p else X


def lstsq_b_tangent(b_t, self_p):
    """Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of B."""
    B = _as_matrix(b_t, self_p)
    X = torch.linalg.pinv(self_p) @ B
    return X.squeeze(-1) if B is not b_t else X


def lstsq_grads(grad, grad_residuals, self, b, solution, residuals):
    """Gradients (gA, gB) of `linalg_lstsq`'s solution X = pinv(A) B and residuals:
    gA = pinv_grad(gX B^H, A, pinv(A)), gB = pinv(A)^H gX, plus, where the
    residuals were computed, 2 (r diag(g_res)) X^H for A and -2 r diag(g_res) for B
    (see lstsq_residuals_tangent); summed over broadcast batch dimensions."""
    pinv = torch.linalg.pinv(self)
    B = _as_matrix(b, self)
    vector = B is not b
    g = grad.unsqueeze(-1) if vector else grad
    gA = pinv_grad(g @ B.mH, self, pinv)
    gB = pinv.mH @ g
    if residuals.numel():
        X = solution.unsqueeze(-1) if vector else solution
        weighted = 2 * (self @ X - B) * grad_residuals.unsqueeze(-2)
        gA = gA + weighted @ X.mH
        gB = gB - weighted
    gB = gB.squeeze(-1) if vector else gB
    return unbroadcast(gA, self), unbroadcast(gB, b)


def lstsq_residuals_tangent(self_t, b_t, self_p, b_p, solution, residuals):
    """Tangent of `linalg_lstsq`'s residuals, the squared column norms of
    r = A X - B (computed for m > n with a driver other than gelsy; else empty):
    2 Re sum_rows(conj(r) (dA X - dB)) (the dX term vanishes: A^H r = 0)."""
    if not residuals.numel():
        return torch.zeros_like(residuals)
    B = _as_matrix(b_p, self_p)
    vector = B is not b_p
    X = solution.unsqueeze(-1) if vector else solution
    dB = b_t.unsqueeze(-1) if vector else b_t
    r = self_p @ X - B
    return 2 * (r.conj() * (self_t @ X - dB)).real.sum(-2)


__all__ += [  # linalg1: solves, factorizations, determinants
    "cholesky_grad",
    "cholesky_inverse_grad",
    "cholesky_inverse_tangent",
    "cholesky_solve_grads",
    "cholesky_solve_tangent",
    "cholesky_tangent",
    "det_grad",
    "det_tangent",
    "householder_product_grads",
    "householder_product_tangent",
    "linalg_solve_grads",
    "linalg_solve_tangent",
    "lu_factor_grad",
    "lu_factor_tangent",
    "lu_grad",
    "lu_solve_grads",
    "lu_solve_tangent",
    "lu_tangents",
    "lu_unpack_grad",
    "lu_unpack_tangents",
    "matrix_exp_differential",
    "side_matmul",
    "slogdet_grad",
    "slogdet_tangents",
    "solve_triangular_grads",
    "triangular_part",
    "triangular_solve_grads",
    "triangular_solve_tangent",
]


def triangular_part(t: torch.Tensor, upper: bool, unitriangular: bool = False):
    """The triangle of the last two dims an `upper`/lower triangular op reads: triu
    or tril, without the diagonal when `unitriangular` (a unit diagonal is not read).
    Self-adjoint, so it projects tangents and gradients alike."""
    if upper:
        return t.triu(1 if unitriangular else 0)
    return t.tril(-1 if unitriangular else 0)


def side_matmul(m: torch.Tensor, x: torch.Tensor, left: bool) -> torch.Tensor:
    """`m @ x` when `left`, else `x @ m`: the coefficient matrix on its side of a
    solve (`left` as in linalg.solve)."""
    return m.matmul(x) if left else x.matmul(m)


def _sum_to(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Sum broadcast batch dims away to `like`'s shape (real part for a real one)."""
    return unbroadcast(t, like)


def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    # linalg.solve's rule: B is a (batch of) vector(s) when it is 1-d or has A's
    # shape without the last dim.
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])


def linalg_solve_tangent(A_t, B_t, A, B, result, LU, pivots, left: bool):
    """Tangent of X = A^{-1} B (`left`) or B A^{-1}: A^{-1}(dB - dA X), or
    (dB - X dA) A^{-1}, with the saved LU factorization of A; vector right-hand
    sides as linalg.solve reads them."""
    vector = _is_vector_rhs(A, B)
    X = result.unsqueeze(-1) if vector else result
    dB = B_t.unsqueeze(-1) if vector else B_t
    rhs = dB - side_matmul(A_t, X, left)
    dX = torch.linalg.lu_solve(LU, pivots, rhs, left=left)
    return dX.squeeze(-1) if vector else dX


def linalg_solve_grads(grad, A, B, result, LU, pivots, left: bool):
    """Gradients (A, B) of X = A^{-1} B (`left`) or B A^{-1}: gB = A^{-H} g (or
    g A^{-H}), gA = -gB X^H (or -X^H gB), summed to the inputs' shapes."""
    vector = _is_vector_rhs(A, B)
    g = grad.unsqueeze(-1) if vector else grad
    X = result.unsqueeze(-1) if vector else result
    gB = torch.linalg.lu_solve(LU, pivots, g, left=left, adjoint=True)
    gA = -(gB.matmul(X.mH) if left else X.mH.matmul(gB))
    return _sum_to(gA, A), _sum_to(gB.squeeze(-1) if vector else gB, B)


def solve_triangular_grads(grad, A, B, result, upper: bool, left: bool, unitri: bool):
    """Gradients (A, B) of linalg.solve_triangular: gB solves the adjoint system,
    gA = -gB X^H (or -X^H gB) restricted to the triangle the op reads."""
    gB = torch.linalg.solve_triangular(
        A.mH, grad, upper=not upper, left=left, unitriangular=unitri
    )
    gA = -(gB.matmul(result.mH) if left else result.mH.matmul(gB))
    return _sum_to(triangular_part(gA, upper, unitri), A), _sum_to(gB, B)


def triangular_solve_tangent(B_t, A_t, A, solution, upper, transpose, unitri):
    """Tangent of triangular_solve's solution X of op(A) X = B (op: transpose when
    `transpose`): op(A)^{-1}(dB - op(dA') X), dA' the triangle of dA it reads."""
    dA = triangular_part(A_t, upper, unitri)
    rhs = B_t - (dA.mT if transpose else dA).matmul(solution)
    return torch.triangular_solve(rhs, A, upper, transpose, unitri)[0]


def triangular_solve_grads(
    grad_solution, grad_coefficient, B, A, solution, upper, transpose, unitri
):
    """Gradients (B, A) of triangular_solve, from those of the solution and of the
    cloned coefficient (a copy of A): gB = op(A)^{-H} g, gA = the triangle of
    -gB X^H (transposed back when `transpose`) plus the clone's gradient."""
    gB = torch.triangular_solve(grad_solution, A.conj(), upper, not transpose, unitri)[
        0
    ]
    g_op = -gB.matmul(solution.mH)
    gA = triangular_part(g_op.mT if transpose else g_op, upper, unitri)
    gA = gA + grad_coefficient
    return _sum_to(gB, B), _sum_to(gA, A)


def _phi(m: torch.Tensor) -> torch.Tensor:
    # The lower triangle with half the diagonal (self-adjoint).
    return m.tril() - 0.5 * torch.diag_embed(m.diagonal(0, -2, -1))


def cholesky_tangent(A_t, L, upper: bool):
    """Tangent of the Cholesky factor (A = L L^H, or U^H U when `upper`):
    dL = L phi(L^{-1} dA L^{-H}), phi = lower triangle with half the diagonal."""
    L_ = L.mH if upper else L
    m = torch.linalg.solve_triangular(L_, A_t, upper=False, left=True)
    m = torch.linalg.solve_triangular(L_.mH, m, upper=True, left=False)
    dL = L_.matmul(_phi(m))
    return dL.mH if upper else dL


def cholesky_grad(grad, L, upper: bool):
    """Gradient of the Cholesky factor: L^{-H} S L^{-1}, with X = tril(L^H gL) and
    S = (X + tril(X, -1)^H) / 2, Hermitian but for the diagonal (as native); on
    Hermitian tangents, the adjoint of `cholesky_tangent`."""
    L_ = L.mH if upper else L
    g = grad.mH if upper else grad
    x = L_.mH.matmul(g).tril()
    m = 0.5 * (x + x.tril(-1).mH)
    m = torch.linalg.solve_triangular(L_.mH, m, upper=True, left=True)
    return torch.linalg.solve_triangular(L_, m, upper=False, left=False)


def _cholesky_product_tangent(L_t, L, upper: bool):
    # d(L L^H) (or d(U^H U)), reading the factor's triangle only.
    L, dL = triangular_part(L, upper), triangular_part(L_t, upper)
    k = dL.mH.matmul(L) if upper else dL.matmul(L.mH)
    return k + k.mH


def _cholesky_product_grad(gA, L, upper: bool):
    # Adjoint of `_cholesky_product_tangent`.
    L = triangular_part(L, upper)
    s = gA + gA.mH
    return triangular_part(L.matmul(s) if upper else s.matmul(L), upper)


def cholesky_solve_tangent(B_t, L_t, L, result, upper: bool):
    """Tangent of X = (L L^H)^{-1} B (U^H U when `upper`), the factor read in its
    triangle: (L L^H)^{-1}(dB - d(L L^H) X)."""
    rhs = B_t - _cholesky_product_tangent(L_t, L, upper).matmul(result)
    return torch.cholesky_solve(rhs, L, upper)


def cholesky_solve_grads(grad, B, L, result, upper: bool):
    """Gradients (B, L) of cholesky_solve: gB = A^{-1} g (A = L L^H is Hermitian),
    gA = -gB X^H taken back to the factor's triangle."""
    gB = torch.cholesky_solve(grad, L, upper)
    gL = _cholesky_product_grad(-gB.matmul(result.mH), L, upper)
    return _sum_to(gB, B), _sum_to(gL, L)


def cholesky_inverse_tangent(L_t, L, result, upper: bool):
    """Tangent of R = (L L^H)^{-1} (U^H U when `upper`): -R d(L L^H) R."""
    return -result.matmul(_cholesky_product_tangent(L_t, L, upper)).matmul(result)


def cholesky_inverse_grad(grad, L, result, upper: bool):
    """Gradient of cholesky_inverse: -R g R (R Hermitian) taken back to the factor."""
    return _cholesky_product_grad(-result.matmul(grad).matmul(result), L, upper)


def _lu_nonsingular(LU: torch.Tensor) -> torch.Tensor:
    # Zero pivots moved to eps, as native does: det is smooth, so its derivative
    # at a singular matrix is the limit of nearby ones.
    d = LU.diagonal(0, -2, -1)
    eps = torch.finfo(d.real.dtype).eps
    return LU + torch.diag_embed(torch.where(d == 0, eps, 0.0).to(LU.dtype))


def _det_lu_is_of_transpose(A: torch.Tensor) -> bool:
    # _linalg_det and _linalg_slogdet factor A^T when A is real and contiguous.
    return A.is_contiguous() and not A.is_complex()


def _trace_inv_times(A_t, A, LU, pivots) -> torch.Tensor:
    # tr(A^{-1} dA) from the saved LU of A (or of A^T).
    solved = torch.linalg.lu_solve(
        _lu_nonsingular(LU), pivots, A_t, adjoint=_det_lu_is_of_transpose(A)
    )
    return solved.diagonal(0, -2, -1).sum(-1)


def _inverse_adjoint(A, LU, pivots) -> torch.Tensor:
    # A^{-H} from the saved LU of A (or of A^T).
    eye = torch.eye(A.shape[-1], dtype=A.dtype).expand_as(A)
    adjoint = not _det_lu_is_of_transpose(A)
    return torch.linalg.lu_solve(_lu_nonsingular(LU), pivots, eye, adjoint=adjoint)


def _det_or_limit(det, LU, pivots) -> torch.Tensor:
    # det, or where it is 0, the determinant with zero pivots moved to eps: times
    # A^{-1} from the same factors, it tends to the adjugate (the derivative of det).
    k = LU.shape[-1]
    swaps = (pivots != torch.arange(1, k + 1, dtype=pivots.dtype)).sum(-1)
    sign = (1 - 2 * (swaps % 2)).to(LU.dtype)
    nudged = sign * _lu_nonsingular(LU).diagonal(0, -2, -1).prod(-1)
    return torch.where(det == 0, nudged, det)


def det_tangent(A_t, A, det, LU, pivots):
    """Tangent of det(A): det * tr(A^{-1} dA), from _linalg_det's LU (of A^T for a
    real contiguous A); at a singular A, the limit tr(adj(A) dA)."""
    return _det_or_limit(det, LU, pivots) * _trace_inv_times(A_t, A, LU, pivots)


def det_grad(grad, A, det, LU, pivots):
    """Gradient of det(A): g conj(det) A^{-H} (g adj(A)^H at a singular A)."""
    scale = (grad * _det_or_limit(det, LU, pivots).conj()).unsqueeze(-1).unsqueeze(-1)
    return scale * _inverse_adjoint(A, LU, pivots)


def slogdet_tangents(A_t, A, sign, LU, pivots):
    """Tangents (sign, logabsdet) of slogdet: with t = tr(A^{-1} dA), d logabsdet =
    Re t and d sign = i Im(t) sign (zero for real A)."""
    t = _trace_inv_times(A_t, A, LU, pivots)
    if not t.is_complex():
        return torch.zeros_like(sign), t
    return sign * (1j * t.imag), t.real


def slogdet_grad(grad_sign, grad_logabsdet, A, sign, LU, pivots):
    """Gradient of slogdet: c A^{-H}, c = g_logabsdet + i Im(g_sign conj(sign))
    (c = g_logabsdet for real A)."""
    c = grad_logabsdet
    if A.is_complex():
        c = c + 1j * (grad_sign * sign.conj()).imag
    return c.unsqueeze(-1).unsqueeze(-1) * _inverse_adjoint(A, LU, pivots)


def lu_tangents(A_t, P, L, U):
    """Tangents (dL, dU) of A = P L U (L unit lower m x k, U upper k x n, any m, n).
    On the leading k x k block, M = L^{-1} P^T dA U^{-1}, dL = L tril(M, -1),
    dU = triu(M) U; the rest of U (wide) or of L (tall) follows from the remaining
    columns or rows of P^T dA."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    E = P.mT.matmul(A_t)
    L1, U1 = L[..., :k, :], U[..., :, :k]
    M = torch.linalg.solve_triangular(
        L1, E[..., :k, :k], upper=False, left=True, unitriangular=True
    )
    M = torch.linalg.solve_triangular(U1, M, upper=True, left=False)
    dL, dU = L1.matmul(M.tril(-1)), M.triu().matmul(U1)
    if m < n:
        rest = E[..., :, k:] - dL.matmul(U[..., :, k:])
        rest = torch.linalg.solve_triangular(
            L1, rest, upper=False, left=True, unitriangular=True
        )
        dU = torch.cat([dU, rest], -1)
    elif m > n:
        rest = E[..., k:, :] - L[..., k:, :].matmul(dU)
        rest = torch.linalg.solve_triangular(U1, rest, upper=True, left=False)
        dL = torch.cat([dL, rest], -2)
    return dL, dU


def lu_grad(grad_L, grad_U, P, L, U):
    """Gradient of A = P L U from those of L and U: the adjoint of `lu_tangents`
    (only the strictly lower part of grad_L's leading block and the upper part of
    grad_U's count, as L's unit diagonal and zeros are constants)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    L1, U1 = L[..., :k, :], U[..., :, :k]
    gL, gU = grad_L[..., :k, :], grad_U[..., :, :k]
    tail = None
    if m < n:
        tail = torch.linalg.solve_triangular(
            L1.mH, grad_U[..., :, k:], upper=True, left=True, unitriangular=True
        )
        gL = gL - tail.matmul(U[..., :, k:].mH)
    elif m > n:
        tail = torch.linalg.solve_triangular(
            U1.mH, grad_L[..., k:, :], upper=False, left=False
        )
        gU = gU - L[..., k:, :].mH.matmul(tail)
    gM = L1.mH.matmul(gL).tril(-1) + gU.matmul(U1.mH).triu()
    gE = torch.linalg.solve_triangular(
        L1.mH, gM, upper=True, left=True, unitriangular=True
    )
    gE = torch.linalg.solve_triangular(U1.mH, gE, upper=False, left=False)
    if m < n:
        gE = torch.cat([gE, tail], -1)
    elif m > n:
        gE = torch.cat([gE, tail], -2)
    return P.matmul(gE)


def lu_unpack_tangents(LU_t):
    """(L, U) parts of a packed LU (m x n): the strictly lower part of its first
    k = min(m, n) columns and the upper part of its first k rows; linear, so also
    lu_unpack's tangents."""
    k = min(LU_t.shape[-2], LU_t.shape[-1])
    return LU_t[..., :, :k].tril(-1), LU_t[..., :k, :].triu()


def lu_unpack_grad(grad_L, grad_U, LU):
    """Gradient of a packed LU from those of its unpacked L and U (the adjoint of
    `lu_unpack_tangents`)."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    g = torch.zeros_like(LU, dtype=grad_L.dtype)
    g = g + torch.nn.functional.pad(grad_L.tril(-1), (0, n - k))
    return g + torch.nn.functional.pad(grad_U.triu(), (0, 0, 0, m - k))


def lu_factor_tangent(A_t, LU, pivots):
    """Tangent of linalg.lu_factor's packed LU, dL and dU packed the same way."""
    P, L, U = torch.lu_unpack(LU, pivots)
    dL, dU = lu_tangents(A_t, P, L, U)
    return lu_unpack_grad(dL, dU, LU)


def lu_factor_grad(grad, LU, pivots):
    """Gradient of linalg.lu_factor from that of the packed LU."""
    P, L, U = torch.lu_unpack(LU, pivots)
    gL, gU = lu_unpack_tangents(grad)
    return lu_grad(gL, gU, P, L, U)


def lu_solve_tangent(LU_t, B_t, LU, pivots, result, left: bool, adjoint: bool):
    """Tangent of linalg.lu_solve, X = op(A)^{-1} B (or B op(A)^{-1}), A = P L U
    from the packed LU, op = ^H when `adjoint`: op(A)^{-1}(dB - op(dA) X) (or on the
    right), dA = P (dL U + L dU) from the packed tangent."""
    P, L, U = torch.lu_unpack(LU, pivots)
    dL, dU = lu_unpack_tangents(LU_t)
    dA = P.matmul(dL.matmul(U) + L.matmul(dU))
    rhs = B_t - side_matmul(dA.mH if adjoint else dA, result, left)
    return torch.linalg.lu_solve(LU, pivots, rhs, left=left, adjoint=adjoint)


def lu_solve_grads(grad, LU, pivots, B, result, left: bool, adjoint: bool):
    """Gradients (LU, B) of linalg.lu_solve: gB solves the adjoint system, and the
    gradient of op(A) (-gB X^H, or -X^H gB) goes back to the packed factors."""
    gB = torch.linalg.lu_solve(LU, pivots, grad, left=left, adjoint=not adjoint)
    g_op = -(gB.matmul(result.mH) if left else result.mH.matmul(gB))
    gA = g_op.mH if adjoint else g_op
    P, L, U = torch.lu_unpack(LU, pivots)
    gA = P.mT.matmul(gA)
    gLU = gA.matmul(U.mH).tril(-1) + L.mH.matmul(gA).triu()
    return _sum_to(gLU, LU), _sum_to(gB, B)


def matrix_exp_differential(A, E, adjoint: bool):
    """The Frechet derivative of the matrix exponential at A in direction E, read
    off exp([[A, E], [0, A]]); with `adjoint`, at A^H (its adjoint, for gradients)."""
    if adjoint:
        A = A.mH
    E = E.to(A.dtype) if A.is_complex() else E
    top = torch.cat([A, E], -1)
    bottom = torch.cat([torch.zeros_like(A), A], -1)
    n = A.shape[-1]
    return torch.linalg.matrix_exp(torch.cat([top, bottom], -2))[..., :n, n:]


def _householder_vectors(input: torch.Tensor, k: int) -> torch.Tensor:
    # The first k reflector vectors: below the diagonal from input, 1 on it.
    v = input[..., :, :k].tril(-1)
    eye = torch.eye(input.shape[-2], k, dtype=input.dtype)
    return v + eye


def householder_product_tangent(input_t, tau_t, input, tau):
    """Tangent of Q = (H_1 ... H_k)[:, :n], H_i = I - tau_i v_i v_i^H, built up
    H by H: d(Q_i) = d(Q_{i-1}) H_i + Q_{i-1} dH_i, dH_i = -dtau_i v v^H -
    tau_i (dv v^H + v dv^H) (dv: input_t's column i below the diagonal)."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    V = _householder_vectors(input, k)
    dV = input_t[..., :, :k].tril(-1)
    Q = torch.eye(m, dtype=input.dtype).expand(*input.shape[:-2], m, m)
    dQ = torch.zeros_like(Q)
    for i in range(k):
        v, dv = V[..., :, i : i + 1], dV[..., :, i : i + 1]
        t, dt = tau[..., i, None, None], tau_t[..., i, None, None]
        vvH = v.matmul(v.mH)
        H = torch.eye(m, dtype=input.dtype) - t * vvH
        dH = -dt * vvH - t * (dv.matmul(v.mH) + v.matmul(dv.mH))
        dQ = dQ.matmul(H) + Q.matmul(dH)
        Q = Q.matmul(H)
    return dQ[..., :, :n]


def householder_product_grads(grad, input, tau):
    """Gradients (input, tau) of householder_product, the adjoint of
    `householder_product_tangent`: with gH_i = (H_1..H_{i-1})^H G (H_{i+1}..H_k
    E)^H, gtau_i = -v^H gH_i v and gv_i = -conj(tau_i) gH_i v - tau_i gH_i^H v."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    V = _householder_vectors(input, k)
    eye = torch.eye(m, dtype=input.dtype)
    Hs = [
        eye
        - tau[..., i, None, None] * V[..., :, i : i + 1].matmul(V[..., :, i : i + 1].mH)
        for i in range(k)
    ]
    # right[i] = H_{i+1} ... H_k E (m x n), E the first n columns of I.
    right = [None] * (k + 1)
    right[k] = torch.eye(m, n, dtype=input.dtype).expand(*input.shape[:-2], m, n)
    for i in reversed(range(k)):
        right[i] = Hs[i].matmul(right[i + 1])
    prefix = torch.eye(m, dtype=input.dtype).expand(*input.shape[:-2], m, m)
    g_cols, g_tau = [], []
    for i in range(k):
        gH = prefix.mH.matmul(grad).matmul(right[i + 1].mH)
        v, t = V[..., :, i : i + 1], tau[..., i, None, None]
        g_tau.append(-(v.mH.matmul(gH).matmul(v))[..., 0, 0])
        g_cols.append(-t.conj() * gH.matmul(v) - t * gH.mH.matmul(v))
        prefix = prefix.matmul(Hs[i])
    g_input = torch.zeros_like(input, dtype=grad.dtype)
    if k:
        g_input = g_input + torch.nn.functional.pad(
            torch.cat(g_cols, -1).tril(-1), (0, n - k)
        )
        g_tau = torch.stack(g_tau, -1)
    else:
        g_tau = torch.zeros_like(tau, dtype=grad.dtype)
    return as_real_like(g_input, input), as_real_like(g_tau, tau)


__all__ += [  # hvp_act
    "bce_cross_derivative",
    "bce_self_second_derivative",
    "elu_second_derivative",
    "gelu_second_derivative",
    "glu_double_backward",
    "glu_tangent",
    "mish_second_derivative",
]


def elu_second_derivative(self_or_result, alpha, scale, input_scale, is_result):
    """d elu_backward(g, ...) / d self_or_result, divided by g, element-wise. With
    the input x (is_result False) it is elu's second derivative:
    input_scale**2 * alpha * scale * exp(x * input_scale) where x <= 0, else 0.
    With elu's result y (is_result True) the op computes the first derivative as
    input_scale * (y + alpha * scale) where y <= 0: its derivative in y is
    input_scale there, else 0."""
    x = self_or_result
    negative = (x <= 0).to(x.dtype)
    if is_result:
        return negative * input_scale
    return (
        negative * (input_scale * input_scale * alpha * scale) * (x * input_scale).exp()
    )


def gelu_second_derivative(self, approximate="none"):
    """The second derivative of gelu, element-wise: phi(x) (2 - x^2) for the exact
    form (phi the standard normal density); for approximate="tanh", with
    u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715 and T = tanh(u):
    (1 - T^2) (u' - x T u'^2 + x u''/2)."""
    x = self
    if approximate == "tanh":
        k = (2.0 / torch.pi) ** 0.5
        c = 0.044715
        t = (k * (x + c * x * x * x)).tanh()
        du = k * (1 + 3 * c * x * x)
        return (1 - t * t) * (du - x * t * du * du + 3 * k * c * x * x)
    return (-0.5 * x * x).exp() / (2.0 * torch.pi) ** 0.5 * (2 - x * x)


def mish_second_derivative(self):
    """The second derivative of mish(x) = x tanh(softplus(x)), element-wise: with
    T = tanh(softplus(x)) and s = sigmoid(x),
    (1 - T^2) (2 s + x s (1 - s) - 2 x s^2 T)."""
    x = self
    t = torch.nn.functional.softplus(x).tanh()
    s = x.sigmoid()
    return (1 - t * t) * (2 * s + x * s * (1 - s) - 2 * x * s * s * t)


def glu_tangent(t, self, dim: int):
    """The tangent of glu(self, dim) = a * sigmoid(b) ((a, b) the halves of self along
    `dim`) for the input tangent t: t_a sigmoid(b) + a sigmoid'(b) t_b. Also the
    gradient of glu_backward with respect to its grad_output (real)."""
    a, b = self.chunk(2, dim)
    ta, tb = t.chunk(2, dim)
    s = b.sigmoid()
    return ta * s + a * s * (1 - s) * tb


def glu_double_backward(grad, grad_output, self, dim: int):
    """The gradient with respect to self of glu_backward(grad_output, self, dim)
    weighted by `grad` (real): glu's Hessian applied to grad and contracted with
    grad_output. With (a, b) the halves of self, s = sigmoid(b), s' = s (1 - s) and
    (g_a, g_b) the halves of grad: [g_b go s', s' go (g_a + g_b a (1 - 2 s))].
    The Hessian is symmetric, so with grad := a tangent of self it is also that
    tangent's term in glu_backward's forward derivative."""
    a, b = self.chunk(2, dim)
    ga, gb = grad.chunk(2, dim)
    s = b.sigmoid()
    ds = s * (1 - s)
    return torch.cat(
        [gb * grad_output * ds, ds * grad_output * (ga + gb * a * (1 - 2 * s))], dim
    )


def bce_self_second_derivative(self, target, weight):
    """d^2 binary_cross_entropy / d self^2, element-wise (unreduced):
    w ((x - y)^2 + y (1 - y)) / (x (1 - x))^2, the x (1 - x) kept from 0 as in
    `bce_self_derivative`."""
    d = (self - target) ** 2 + target * (1 - target)
    d = d / (self * (1 - self)).clamp_min(1e-12) ** 2
    return d if weight is None else d * weight


def bce_cross_derivative(self, weight):
    """d^2 binary_cross_entropy / d self d target, element-wise (unreduced):
    -w / (x (1 - x)), the denominator kept from 0 as in `bce_self_derivative`."""
    d = -(self * (1 - self)).clamp_min(1e-12).reciprocal()
    return d if weight is None else d * weight


__all__ += [  # nn backward ops (part hvp_nn): forward-over-reverse
    "convolution_backward_grads",
    "convolution_backward_tangent",
    "embedding_dense_backward_grad",
    "norm_backward_grads",
    "norm_backward_tangent",
]


def _conv_backward(grad_output, input, weight, conv_args, mask):
    stride, padding, dilation, transposed, output_padding, groups = conv_args
    return torch.ops.aten.convolution_backward(
        grad_output,
        input,
        weight,
        None,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        mask,
    )


def convolution_backward_tangent(
    which: int,
    result,
    grad_output_t,
    other_t,
    grad_output,
    input,
    weight,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
):
    """Tangent of output `which` of `convolution_backward` (None where that output
    was not computed). With A(w) the convolution x -> conv(x, w) and C(x) the map
    w -> conv(x, w), the outputs are A(w)^H g, C(x)^H g and the sum of g over all
    but the channel dimension: bilinear in (g, w), bilinear in (g, x), linear in g.
    `other_t` is the weight's tangent for output 0, the input's for output 1
    (unused for output 2)."""
    if result is None:
        return None
    args = (stride, padding, dilation, transposed, output_padding, groups)
    if which == 2:
        return grad_output_t.sum([0] + list(range(2, grad_output_t.dim())))
    mask = [which == 0, which == 1, False]
    tangent = _conv_backward(grad_output_t, input, weight, args, mask)[which]
    if which == 0:
        other = _conv_backward(grad_output, input, other_t, args, mask)[0]
    else:
        other = _conv_backward(grad_output, other_t, weight, args, mask)[1]
    return tangent + other


def convolution_backward_grads(
    grad_input_grad,
    grad_weight_grad,
    grad_bias_grad,
    grad_output,
    input,
    weight,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
) -> tuple:
    """Gradients of `convolution_backward` (grad_output, input, weight) from those of
    its three outputs (None where absent), the adjoints of the maps in
    `convolution_backward_tangent`: grad_output gets conv(gI, w) + conv(x, gW) + gb
    (per channel), input gets A(gW)^H g and weight gets C(gI)^H g."""
    args = (stride, padding, dilation, transposed, output_padding, groups)
    go_grad = input_grad = weight_grad = None

    def conv(x, w):
        return torch.ops.aten.convolution(x, w, None, *args)

    if grad_input_grad is not None:
        go_grad = conv(grad_input_grad, weight)
        weight_grad = _conv_backward(
            grad_output, grad_input_grad, weight, args, [False, True, False]
        )[1]
    if grad_weight_grad is not None:
        term = conv(input, grad_weight_grad)
        go_grad = term if go_grad is None else go_grad + term
        input_grad = _conv_backward(
            grad_output, input, grad_weight_grad, args, [True, False, False]
        )[0]
    if grad_bias_grad is not None:
        term = channel_view(grad_bias_grad, grad_output.dim()).expand(grad_output.shape)
        go_grad = term if go_grad is None else go_grad + term
    return go_grad, input_grad, weight_grad


def embedding_dense_backward_grad(
    grad, indices, padding_idx, scale_grad_by_freq: bool
) -> torch.Tensor:
    """Gradient of `embedding_dense_backward` at its grad_output: the op adds row i
    of grad_output into row indices[i] (skipping padding_idx, divided by the count
    of each index when scale_grad_by_freq), so its adjoint reads `grad` back at
    `indices` with the same mask and scale."""
    flat = indices.reshape(-1)
    rows = grad.index_select(0, flat)
    if scale_grad_by_freq:
        counts = torch.bincount(flat, minlength=grad.shape[0]).to(grad.dtype)
        rows = rows / counts.index_select(0, flat).unsqueeze(-1)
    if padding_idx is not None and padding_idx >= 0:
        rows = rows * (flat != padding_idx).unsqueeze(-1).to(rows.dtype)
    return rows.reshape(list(indices.shape) + [grad.shape[-1]])


# The backward ops of layer, batch and group norm compute, over the reduced
# dimensions `dims` of a layout where the statistics broadcast,
#   grad_input = r * (u - mean(u) - xhat * mean(u * xhat)),  u = g * w,
#   xhat = (x - mean) * r,  grad_weight = sum(g * xhat),  grad_bias = sum(g),
# the weight sums over the dimensions the weight is broadcast along.


class _NormLayout:
    """How one norm's tensors are laid out so that `dims` are the reduced ones:
    `view` (input-shaped tensors), `stat` (mean, rstd: broadcastable), `wview`
    (the weight, a bias-shaped gradient); `out` maps back to the input's shape and
    `to_weight` sums to the weight's."""

    def __init__(self, kind, input, extra):
        self.kind = kind
        self.shape = input.shape
        ndim = input.dim()
        if kind == "layer":
            k = len(extra)
            self.dims = list(range(ndim - k, ndim))
            self.wshape = list(extra)
            self.view = lambda t: t
            self.stat = lambda t: t
            self.wview = lambda w: w
        elif kind == "batch":
            self.dims = [0] + list(range(2, ndim))
            self.view = lambda t: t
            self.stat = lambda t: channel_view(t, ndim)
            self.wview = lambda w: channel_view(w, ndim)
        else:  # group: [N, group, C / group * HxW]
            group = extra
            c = input.shape[1]
            shape = _group_shape(input, group)
            self.dims = [-1]
            self.view = lambda t: t.reshape(shape)
            self.stat = lambda t: t.unsqueeze(-1)
            hxw = input.shape[2:].numel()

            def wview(w):
                return w.reshape(1, c, 1).expand(1, c, hxw).reshape(1, group, -1)

            self.wview = wview
        self.ndim = ndim

    def out(self, t):
        return t.reshape(self.shape)

    def to_weight(self, t):
        """A layout tensor summed to the weight's (or bias's) shape."""
        t = t.reshape(self.shape)
        if self.kind == "layer":
            lead = self.ndim - len(self.wshape)
            return t.sum(list(range(lead))) if lead else t
        return t.sum([0] + list(range(2, self.ndim)))

    def from_weight(self, t):
        """A weight-shaped tensor broadcast to the layout."""
        return self.wview(t)

    def mean(self, t):
        return t.mean(self.dims, keepdim=True)

    def sum(self, t):
        return t.sum(self.dims, keepdim=True)


def _norm_layout(kind, input, weight, mean, rstd, extra, train, eps):
    """The layout and, in it, x, mean, rstd (eval batch norm: from the running
    statistics) and the weight (None without one)."""
    layout = _NormLayout(kind, input, extra)
    x = layout.view(input)
    if kind == "batch" and not train:
        m = layout.stat(mean)
        r = layout.stat((rstd + eps).rsqrt())
    else:
        m, r = layout.stat(mean), layout.stat(rstd)
    w = None if weight is None else layout.wview(weight)
    return layout, x, m, r, w


def norm_backward_tangent(
    which: int,
    result,
    kind: str,
    grad_out_t,
    input_t,
    weight_t,
    mean_t,
    rstd_t,
    grad_out,
    input,
    weight,
    mean,
    rstd,
    extra,
    train=True,
    eps=0.0,
):
    """Tangent of output `which` (grad_input, grad_weight, grad_bias) of the
    backward op of a norm, `kind` "layer" (`extra`: normalized_shape), "batch"
    (`mean`, `rstd`: save_mean, save_invstd in training, running_mean,
    running_var in eval with `eps`) or "group" (`extra`: the group count); None
    where that output was not computed. Tangents may be None (the weight's when
    there is none).

    With mean_t = rstd_t = None the statistics are taken as the input's, moving
    with it: xhat_t = r (x_t - mean(x_t) - xhat mean(xhat x_t)),
    r_t = -r^2 mean(xhat x_t) (the total derivative; what forward-over-reverse
    needs, as the saved statistics of layer and batch norm carry no tangent).
    Given their tangents (group norm only), they are inputs of their own:
    xhat_t = r_t (x - mean) + r (x_t - mean_t) (the partial derivatives)."""
    if result is None:
        return None
    layout, x, m, r, w = _norm_layout(
        kind, input, weight, mean, rstd, extra, train, eps
    )
    g = layout.view(grad_out)
    xhat = (x - m) * r
    g_t = None if grad_out_t is None else layout.view(grad_out_t)
    x_t = None if input_t is None else layout.view(input_t)
    w_t = None if weight_t is None else layout.wview(weight_t)
    if which == 2:
        return layout.to_weight(g_t)
    eval_mode = kind == "batch" and not train
    if eval_mode:
        xhat_t = x_t * r
        r_t = None
    elif mean_t is not None:
        xhat_t = (x - m) * layout.stat(rstd_t) + r * (x_t - layout.stat(mean_t))
        r_t = layout.stat(rstd_t)
    else:
        xhat_t = r * (x_t - layout.mean(x_t) - xhat * layout.mean(xhat * x_t))
        r_t = -r * r * layout.mean(xhat * x_t)
    if which == 1:
        return layout.to_weight(g_t * xhat + g * xhat_t)
    u = g if w is None else g * w
    u_t = g_t if w is None else g_t * w
    if w_t is not None:
        u_t = u_t + g * w_t
    if eval_mode:
        return layout.out(u_t * r)
    inner = u - layout.mean(u) - xhat * layout.mean(u * xhat)
    inner_t = (
        u_t
        - layout.mean(u_t)
        - xhat_t * layout.mean(u * xhat)
        - xhat * layout.mean(u_t * xhat + u * xhat_t)
    )
    return layout.out(r_t * inner + r * inner_t)


def norm_backward_grads(
    grad_input_grad,
    grad_weight_grad,
    grad_bias_grad,
    kind: str,
    grad_out,
    input,
    weight,
    mean,
    rstd,
    extra,
    train=True,
    eps=0.0,
    stats_are_inputs: bool = False,
) -> tuple:
    """Gradients of a norm's backward op (see `norm_backward_tangent`) from those of
    its three outputs (None where absent): (grad_out, input, weight, mean, rstd),
    the adjoint of the tangent map. The statistics are the input's (their
    gradient flows into the input's; None for mean and rstd) unless
    `stats_are_inputs` (group norm only: the partial derivatives); the weight's is
    None without a weight."""
    layout, x, m, r, w = _norm_layout(
        kind, input, weight, mean, rstd, extra, train, eps
    )
    g = layout.view(grad_out)
    xhat = (x - m) * r
    eval_mode = kind == "batch" and not train
    zero = torch.zeros_like(x)
    gi = zero if grad_input_grad is None else layout.view(grad_input_grad)
    gw = zero if grad_weight_grad is None else layout.from_weight(grad_weight_grad)
    gb = zero if grad_bias_grad is None else layout.from_weight(grad_bias_grad)
    if eval_mode:
        u_grad = gi * r
        xhat_grad = g * gw
        r_grad = None
    else:
        u = g if w is None else g * w
        # grad_input = r * Q(u): Q is symmetric, so u's gradient is r * Q(gi).
        u_grad = r * (gi - layout.mean(gi) - xhat * layout.mean(xhat * gi))
        xhat_grad = -r * (gi * layout.mean(u * xhat) + u * layout.mean(gi * xhat))
        xhat_grad = xhat_grad + g * gw
        inner = u - layout.mean(u) - xhat * layout.mean(u * xhat)
        r_grad = layout.sum(gi * inner)
    g_grad = (u_grad if w is None else u_grad * w) + gw * xhat + gb
    weight_grad = None if w is None else layout.to_weight(u_grad * g)
    mean_grad = rstd_grad = None
    if eval_mode:
        input_grad = xhat_grad * r
    elif stats_are_inputs:
        input_grad = r * xhat_grad
        mean_grad = -layout.sum(input_grad).squeeze(-1)
        rstd_grad = (r_grad + layout.sum(xhat_grad * (x - m))).squeeze(-1)
    else:
        # xhat_t = r * P(x_t) with P symmetric; r_t = -r^2 mean(xhat * x_t).
        input_grad = r * (
            xhat_grad - layout.mean(xhat_grad) - xhat * layout.mean(xhat * xhat_grad)
        )
        count = max(x.numel() // max(r.numel(), 1), 1)
        input_grad = input_grad - r * r * xhat * r_grad / count
    return (
        layout.out(g_grad),
        layout.out(input_grad),
        weight_grad,
        mean_grad,
        rstd_grad,
    )


def sgn_derivative(v, self, result):
    """sgn's derivative applied to v (a tangent or a gradient: it is self-adjoint):
    (v - Re(v conj(sgn z)) sgn z) / |z|, zero at z = 0; for real inputs sgn is
    piecewise constant, so zero everywhere (also at NaN, as in PyTorch)."""
    if not self.is_complex():
        return torch.zeros_like(v)
    return torch.where(
        self == 0, 0.0, (v - (v * result.conj()).real * result) / self.abs()
    )
