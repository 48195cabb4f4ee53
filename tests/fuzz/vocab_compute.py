"""Steps that compute a new tensor: element-wise ops (with broadcasting and
float32/float64/complex promotion), reductions, matmuls, `where`, `cat`/`stack`,
and indexing (`index`, `gather`, `scatter`, `take`, `masked_fill`).

Only functions smooth everywhere (no abs, max, sqrt, division by a variable): the
finite-difference arbiter would otherwise misjudge kinks, and shrinking drives
values to zero, exactly where the kinks are. atan and logsumexp have branch cuts
for complex arguments (on the imaginary axis, where shrinking puts values), so they
take real ones only. Masks and indices are literals, never computed from values,
for the same reason.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .literals import bools_literal, indices_literal, scatter_index_literal
from .state import DrawFn, GenState, Var, compatible, pick, pick_dim

UNARY = (
    "{a}.sin()",
    "{a}.exp()",
    "{a} * 0.5",
    "{a}.square()",
    "{a}.cos()",
    "{a}.tanh()",
    "torch.sigmoid({a})",
    "{a}.neg()",
    "{a}.pow(3)",
    "{a}.sinh()",
    "{a}.clone()",
    "{a}.contiguous()",
    "{a}.resolve_conj()",
    "{a}.conj_physical()",
    # copy=True: finite differences run float32 as float64, where a conversion
    # to float64 would return the tensor itself, not a copy.
    "{a}.to(torch.float64, copy=True)",
    "{a}.to(torch.float32, copy=True)",
    "{a}.to(torch.complex128, copy=True)",
)
REAL_UNARY = ("{a}.atan()",)

BINARY = (
    "{a} * {b}",
    "{a} + {b}",
    "{a} - {b}",
    "torch.add({a}, {b}, alpha=0.5)",
    "torch.lerp({a}, {b}, 0.25)",
    "torch.addcmul({a}, {b}, {b}, value=0.5)",
    "torch.addcmul({b}, {a}, {b})",
)

REDUCTIONS = (
    "{a}.sum()",
    "{a}.sum({d})",
    "{a}.sum({d}, keepdim=True)",
    "{a}.mean()",
    "{a}.mean({d})",
    "{a}.prod({d})",
    "{a}.cumsum({d})",
    "{a}.var({d})",
)
REAL_REDUCTIONS = ("torch.logsumexp({a}, {d})",)


def unary(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    template = draw(st.sampled_from(UNARY + (() if a.is_complex else REAL_UNARY)))
    return f"{state.fresh()} = " + template.format(a=a.name)


def binary(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    b = pick(draw, state, lambda v: compatible(v.shape, a.shape))
    template = draw(st.sampled_from(BINARY))
    return f"{state.fresh()} = " + template.format(a=a.name, b=b.name)


def reduction(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    real = () if a.is_complex else REAL_REDUCTIONS
    template = draw(st.sampled_from(REDUCTIONS + real))
    return f"{state.fresh()} = " + template.format(a=a.name, d=pick_dim(draw, a))


def _matmul_ok(a: Var, b: Var) -> bool:
    if a.ndim == 0 or b.ndim == 0 or a.ndim > 2 or b.ndim > 2 or a.dtype != b.dtype:
        return False
    return a.shape[-1] == b.shape[0]


def matmul(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state, lambda v: 1 <= v.ndim <= 2)
    if a is None:
        return None
    b = pick(draw, state, lambda v: _matmul_ok(a, v))
    if b is None:
        return None
    return f"{state.fresh()} = {a.name} @ {b.name}"


def where(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    b = pick(draw, state, lambda v: compatible(v.shape, a.shape))
    mask = bools_literal(draw, tuple(torch.broadcast_shapes(a.shape, b.shape)))
    return f"{state.fresh()} = torch.where({mask}, {a.name}, {b.name})"


def concatenate(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state, lambda v: v.ndim >= 1)
    if a is None:
        return None
    d = pick_dim(draw, a)
    if draw(st.booleans()):
        b = pick(draw, state, lambda v: v.shape == a.shape)
        return f"{state.fresh()} = torch.stack([{a.name}, {b.name}], {d})"
    b = pick(
        draw,
        state,
        lambda v: v.ndim == a.ndim
        and all(x == y for i, (x, y) in enumerate(zip(v.shape, a.shape)) if i != d),
    )
    return f"{state.fresh()} = torch.cat([{a.name}, {b.name}], {d})"


def indexing(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state, lambda v: v.ndim >= 1 and v.numel > 0)
    if a is None:
        return None
    d = pick_dim(draw, a)
    kind = draw(
        st.sampled_from(
            ("index", "gather", "index_select", "scatter", "take", "masked_fill")
        )
    )
    new = state.fresh()
    if kind == "index":
        n = draw(st.integers(1, 3))
        return f"{new} = {a.name}[{indices_literal(draw, (n,), a.shape[0])}]"
    if kind == "gather":
        return f"{new} = {a.name}.gather({d}, {indices_literal(draw, a.shape, a.shape[d])})"
    if kind == "index_select":
        n = draw(st.integers(1, 3))
        idx = indices_literal(draw, (n,), a.shape[d])
        return f"{new} = {a.name}.index_select({d}, {idx})"
    if kind == "take":
        n = draw(st.integers(1, 3))
        return f"{new} = {a.name}.take({indices_literal(draw, (n,), a.numel)})"
    if kind == "masked_fill":
        return f"{new} = {a.name}.masked_fill({bools_literal(draw, a.shape)}, 0.5)"
    b = pick(draw, state, lambda v: v.shape == a.shape)
    method = draw(st.sampled_from(("scatter", "scatter_add")))
    if method == "scatter":
        idx = scatter_index_literal(draw, a.shape, d)
    else:
        idx = indices_literal(draw, a.shape, a.shape[d])
    return f"{new} = {a.name}.{method}({d}, {idx}, {b.name})"


COMPUTE = (unary, binary, reduction, matmul, where, concatenate, indexing)
