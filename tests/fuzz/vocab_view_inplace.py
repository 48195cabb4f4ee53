"""In-place view ops (`unsqueeze_`, `squeeze_`, `transpose_`, `swapdims_`, `t_`,
`as_strided_`) on expanded and empty duals: the tangent must take the same
shape and strides as its primal, also where the primal's memory is shared
(stride 0) or absent (an empty dual cut by a stepped slice, `[1::2]` of a
one-element literal, whose tangent is a fresh empty tensor).

`as_strided_` keeps to a block of the tensor's own elements at its own storage
offset: finite differences run on leaves laid out anew, whose memory around the
elements (and whose offset) differs from the literal's.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .literals import DTYPES, SHAPES, dtype_name, literal, tensor_code, values_of
from .state import DrawFn, GenState, Var, pick
from .vocab_duals import tangent_code

KIND = "in-place view op"
LEAF_KIND = "empty or expanded dual"


def odd(var: Var) -> bool:
    """Expanded (a stride 0 over more than one element) or empty."""
    t = var.tensor
    return t.numel() == 0 or any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape))


def _empty_leaf(draw: DrawFn, dtype: torch.dtype) -> str:
    """make_dual of an empty stepped slice of a literal, with a new empty tangent."""
    rows = draw(st.sampled_from(((), (2,))))
    n = draw(st.integers(1, 2))
    storage = literal(draw(values_of((*rows, n), dtype)))
    cut = f"[{n}::2]" if not rows else f"[:, {n}::2]"
    tangent = f"torch.zeros({(*rows, 0)!r}, dtype={dtype_name(dtype)})"
    return f"fwAD.make_dual({storage}{cut}, {tangent})"


def _expanded_leaf(draw: DrawFn, dtype: torch.dtype) -> str:
    shape = draw(st.sampled_from([s for s in SHAPES if any(n > 1 for n in s)]))
    primal = draw(tensor_code(shape, dtype, "expanded"))
    tangent = tangent_code(draw, shape, dtype, primal, other_dtypes=False)
    return f"fwAD.make_dual({primal}, {tangent})"


def odd_leaf(draw: DrawFn, state: GenState):
    """A recipe: an empty or expanded dual leaf, then in-place view ops on it or
    on an expanded view of it."""
    dtype = draw(st.sampled_from(DTYPES))
    make = _empty_leaf if draw(st.booleans()) else _expanded_leaf
    if not (yield f"{state.fresh()} = {make(draw, dtype)}"):
        return
    state.mark(LEAF_KIND)
    x = state.vars[-1]
    if draw(st.booleans()):
        if not (yield f"{state.fresh()} = {x.name}.expand(2, *{x.name}.shape)"):
            return
        x = state.vars[-1]
    yield from _reshape_in_place(draw, state, x)


def _ops(draw: DrawFn, t: torch.Tensor) -> str:
    """An in-place view op valid for t's current shape."""
    ndim = t.dim()
    options = ["unsqueeze_({u})", "squeeze_()"]
    if ndim >= 1:
        options += ["squeeze_({d})", "swapdims_(0, -1)", "as_strided_"]
    if ndim >= 2:
        options += ["transpose_(0, 1)", "swapaxes_(-1, -2)"]
    if ndim <= 2:
        options.append("t_()")
    op = draw(st.sampled_from(options))
    if op != "as_strided_":
        d = draw(st.integers(0, max(ndim - 1, 0)))
        return op.format(u=draw(st.integers(0, ndim)), d=d)
    # A block from the first element along t's own strides, maybe a dim fewer.
    sizes = [draw(st.integers(min(1, n), n)) for n in t.shape]
    strides = list(t.stride())
    if ndim >= 2 and draw(st.booleans()):
        sizes, strides = sizes[1:], strides[1:]
    return f"as_strided_({tuple(sizes)!r}, {tuple(strides)!r})"


def _reshape_in_place(draw: DrawFn, state: GenState, var: Var):
    """One to three in-place view ops on var, then maybe a read of it."""
    for _ in range(draw(st.integers(1, 3))):
        if not (yield f"{var.name}.{_ops(draw, var.tensor)}"):
            return
        state.mark(KIND)
    if draw(st.booleans()):
        yield f"{state.fresh()} = {var.name} * 2.0"


def view_inplace(draw: DrawFn, state: GenState):
    """A recipe: in-place view ops on an expanded or empty variable, or on a new
    expanded view of one."""
    movable = [v for v in state.vars if state.writable(v)]
    odd_ones = [v for v in movable if odd(v)]
    if odd_ones and draw(st.booleans()):
        yield from _reshape_in_place(draw, state, draw(st.sampled_from(odd_ones)))
        return
    a = pick(draw, state, state.writable)
    if a is None:
        return
    if not (yield f"{state.fresh()} = {a.name}.expand(2, *{a.name}.shape)"):
        return
    yield from _reshape_in_place(draw, state, state.vars[-1])


VIEW_INPLACE = (view_inplace,)
