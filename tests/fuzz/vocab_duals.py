"""Steps about tangents themselves: leaves (`make_dual` of a literal, with a tangent
of its primal's dtype and layout or of another), `make_dual` of a variable (twice
of one primal, too), cutting a tangent off (`detach`, `unpack_dual(...).primal`,
views of that primal), and plain buffers that duals are written into.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .literals import (
    DTYPES,
    SHAPES,
    TensorCode,
    dtype_name,
    layouts_for,
    tensor_code,
)
from .state import DrawFn, GenState, pick

# A tangent of another dtype than its primal's: native keeps it as given.
OTHER_TANGENT_DTYPE = {
    torch.float32: torch.float64,
    torch.float64: torch.float32,
    torch.complex128: torch.float64,
    torch.complex64: torch.complex128,  # a primal made complex64 by a view
}


def tangent_code(
    draw: DrawFn,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    primal: TensorCode | None,
    other_dtypes: bool = True,
) -> TensorCode:
    """A tangent for a primal of `shape` and `dtype`: usually of the same dtype, now
    and then (with `other_dtypes`) of another; of any layout, except that an
    expanded primal gets a tangent expanded the same way, with the same conjugate
    bit (native refuses anything else: it would copy into the shared memory)."""
    if other_dtypes and draw(st.integers(0, 5)) == 5:
        dtype = OTHER_TANGENT_DTYPE[dtype]
    if primal is not None and primal.layout == "expanded":
        return draw(
            tensor_code(shape, dtype, "expanded", primal.expand_dim, primal.conj)
        )
    layout = draw(st.sampled_from(layouts_for(shape)))
    return draw(tensor_code(shape, dtype, layout))


def leaf_code(
    draw: DrawFn, dtypes: tuple[torch.dtype, ...] = DTYPES
) -> tuple[tuple[int, ...], torch.dtype, TensorCode]:
    """The shape, dtype and source of a literal primal."""
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(dtypes))
    return shape, dtype, draw(tensor_code(shape, dtype))


def leaf(draw: DrawFn, state: GenState, dual: bool | None = None) -> str:
    """`x = fwAD.make_dual(<literal>, <literal>)`, or a plain literal."""
    shape, dtype, primal = leaf_code(draw)
    if dual is None:
        dual = draw(st.integers(0, 3)) > 0
    if not dual:
        return f"{state.fresh()} = {primal}"
    tangent = tangent_code(draw, shape, dtype, primal)
    return f"{state.fresh()} = fwAD.make_dual({primal}, {tangent})"


def new_leaf(draw: DrawFn, state: GenState) -> str:
    return leaf(draw, state)


def make_dual_of_variable(draw: DrawFn, state: GenState) -> str | None:
    """make_dual of a variable without tangent, or two make_duals of one primal
    multiplied (each must keep its own tangent)."""
    a = pick(draw, state, lambda v: not v.has_tangent)
    if a is None:
        return None
    first = tangent_code(draw, a.shape, a.dtype, None)
    if draw(st.booleans()):
        return f"{state.fresh()} = fwAD.make_dual({a.name}, {first})"
    second = tangent_code(draw, a.shape, a.dtype, None)
    return (
        f"{state.fresh()} = fwAD.make_dual({a.name}, {first})"
        f" * fwAD.make_dual({a.name}, {second})"
    )


STOP_GRADIENT = (
    "fwAD.unpack_dual({a}).primal",
    "{a}.detach()",
    "fwAD.unpack_dual({a}).primal[0]",
    "fwAD.unpack_dual({a}).primal.t()",
    "fwAD.unpack_dual({a}).primal.view(-1)",
    "fwAD.unpack_dual({a}).primal.real",
    "{a}.detach()[0]",
)


def stop_gradient(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    template = draw(st.sampled_from(STOP_GRADIENT))
    return f"{state.fresh()} = " + template.format(a=a.name)


def plain_buffer(draw: DrawFn, state: GenState) -> str | None:
    """A tensor of zeros shaped like a variable, for duals to be written into."""
    a = pick(draw, state)
    dtype = draw(st.sampled_from((a.dtype, *DTYPES)))
    return f"{state.fresh()} = torch.zeros({a.shape!r}, dtype={dtype_name(dtype)})"


DUALS = (new_leaf, make_dual_of_variable, stop_gradient, plain_buffer)
