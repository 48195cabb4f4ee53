"""Helpers for shape, view and indexing ops.

The gradients of permute, slice, narrow, cat/split/stack/unbind, repeat, pad/roll,
as_strided and as_strided_scatter, block_diag, gather/scatter and scatter_reduce.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dualgen.generated.helpers import as_real_like, extreme_weights, scatter_touched

__all__ = [
    "as_strided_grad",
    "as_strided_scatter_grads",
    "block_diag_grads",
    "cat_grads",
    "gather_grad",
    "inverse_permutation",
    "narrow_grad",
    "negated",
    "repeat_grad",
    "resize_tangent",
    "scatter_reduce_grads",
    "slice_grad",
    "split_like",
    "stack_grads",
]


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


def as_strided_grad(grad, like, size, stride, storage_offset) -> torch.Tensor:
    """Gradient of `as_strided` for a view that does not overlap itself: `grad`
    placed where the view reads `like`'s storage, zeros elsewhere."""
    offset = like.storage_offset() if storage_offset is None else storage_offset
    flat = grad.new_zeros(like.untyped_storage().nbytes() // like.element_size())
    flat.as_strided(size, stride, offset).copy_(grad)
    return flat.as_strided(like.size(), like.stride(), like.storage_offset()).clone()


def resize_tangent(self_t, result) -> torch.Tensor:
    """Tangent of resize_ (from torch's conjugate fallback: derivatives.yaml):
    self's tangent laid out in place over the same memory as self now is
    (`result`), as the tangent was laid out as self was (an in-place view op
    changes its tangent's geometry in place, as auto_linear does). Where the
    resize grows self's memory, the tangent's grows alike, in place (its views
    keep sharing it), the memory it adds zero: the fallback then copies the
    values, and their tangents, into it. The memory grows through a view of
    self_t, so that an enclosing level grows self_t's own tangent alike (nested
    levels: self_t is a dual there)."""
    extent = 1 + sum((n - 1) * s for n, s in zip(result.shape, result.stride()))
    needed = self_t.storage_offset() + extent if result.numel() else 0
    length = self_t.untyped_storage().nbytes() // self_t.element_size()
    if needed > length:
        memory = self_t.as_strided([length], [1], 0)
        memory.resize_(needed)
        memory[length:].zero_()
    return self_t.as_strided_(result.shape, result.stride(), self_t.storage_offset())


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


def scatter_reduce_grads(
    grad, self, dim: int, index, src, reduce: str, include_self: bool, result
):
    """Gradients of scatter_reduce (sum, mean, amax, amin) for `self` and `src`.

    amax/amin share the gradient equally among the elements attaining the result.
    """
    touched = scatter_touched(self, dim, index)
    if reduce == "sum":
        self_grad = grad if include_self else grad.masked_fill(touched, 0)
        src_grad = grad.gather(dim, index)
    elif reduce == "mean":
        count = _scatter_count(self, dim, index, include_self)
        share = grad / count.masked_fill(count == 0, 1)
        self_grad = share if include_self else share.masked_fill(touched, 0)
        src_grad = share.gather(dim, index)
    elif reduce in ("amax", "amin"):
        self_w, src_w = extreme_weights(self, dim, index, src, include_self, result)
        self_grad = grad * self_w
        src_grad = grad.gather(dim, index) * src_w
    else:
        raise NotImplementedError(
            f"scatter_reduce: no derivative for reduce={reduce!r}"
        )
    return self_grad, _fit(src_grad, src)


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
