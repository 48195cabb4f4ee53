"""Custom autograd.Functions at nested dual levels (dualgen only: native has one
level, and torch.func's nested jvp of a Function gives 0 second derivatives, so
the references are the same program in aten ops, and analytic derivatives): every
style of Function, derived jvps, second and third derivatives, and the error
asking for `setup_context` when a `forward(ctx, ...)` saves an internal tensor.
"""

from __future__ import annotations

import pytest
import torch
from custom_function_checks import (
    STE,
    CtxMul,
    Diagonal,
    DoubleInPlace,
    FirstRow,
    Identity,
    MulExp,
    MulInPlace,
    MySin,
    SetupMul,
    SinCos,
    SortNonDiff,
    assert_same,
    clean_state,  # noqa: F401 - autouse
    randn,
    skip_without_keywords,
    without_jvp,
)
from torch.autograd.function import Function
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# nested levels


class CtxExp(Function):
    """forward(ctx, ...) saving its output: usable at nested levels."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_forward(y)
        return y

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y


class CtxExpInternal(Function):
    """forward(ctx, ...) saving a tensor computed inside forward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x.exp())
        return x.exp()

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y


NESTED = {
    "setup_context": (MySin.apply, torch.sin, (5,)),
    "ctx-saves-output": (CtxExp.apply, torch.exp, (5,)),
    "ctx-saves-inputs": (
        lambda x: CtxMul.apply(x, x.cos(), 3.0),
        lambda x: x * x.cos() * 3.0,
        (5,),
    ),
    "kwargs": (
        lambda x: SetupMul.apply(x, x.cos(), shift=x),
        lambda x: x * x.cos() * 2.0 + x,
        (5,),
    ),
    "ste": (STE.apply, lambda x: x.detach().round() + (x - x.detach()), (5,)),
    "view": (Diagonal.apply, torch.diagonal, (3, 3)),
    "input-as-is": (Identity.apply, lambda x: x.view_as(x), (5,)),
    "non-tensor-outputs": (lambda x: SinCos.apply(x, "label")[2], torch.cos, (5,)),
    "index-saved": (lambda x: SortNonDiff.apply(x)[0], lambda x: x.sort()[0], (5,)),
    "derived": (without_jvp(MySin).apply, torch.sin, (5,)),
    "derived-several": (
        lambda x: sum(without_jvp(MulExp).apply(x, x.sin())),
        lambda x: x * x.sin() + x.exp(),
        (5,),
    ),
    "derived-view": (without_jvp(FirstRow).apply, lambda x: x[0], (2, 3)),
    "derived-mark_dirty": (
        lambda x: without_jvp(DoubleInPlace).apply(x.clone()),
        lambda x: 2 * x,
        (5,),
    ),
}


def nested(f, x, u, v):
    """f at x with tangent u at level 0 and v at level 1: the output, its two
    tangents and the level-0 tangent of the level-1 tangent (f'' u v)."""
    with dual_fwAD.dual_level():
        with dual_fwAD.dual_level():
            outer = dual_fwAD.make_dual(x, u, level=0) if u is not None else x
            inner = dual_fwAD.make_dual(outer, v, level=1) if v is not None else outer
            y = f(inner)
            y_v = dual_fwAD.unpack_dual(y, level=1).tangent
        y_u = dual_fwAD.unpack_dual(y, level=0).tangent
        y_uv = dual_fwAD.unpack_dual(y_v, level=0).tangent if y_v is not None else None
        return y.detach(), y_u, y_v, y_uv


@pytest.mark.parametrize("tangents", ["both", "outer", "inner"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=skip_without_keywords) if c == "kwargs" else c
        for c in NESTED
    ],
)
def test_nested_levels_equal_the_same_program_in_aten_ops(case, tangents):
    function, aten_ops, shape = NESTED[case]
    x, u, v = randn(*shape) * 2, randn(*shape), randn(*shape)
    u = None if tangents == "inner" else u
    v = None if tangents == "outer" else v
    assert_same(nested(function, x, u, v), nested(aten_ops, x, u, v))


def test_nested_second_derivative_is_analytic():
    x, u, v = randn(5), randn(5), randn(5)
    _, y_u, y_v, y_uv = nested(MySin.apply, x, u, v)
    assert_close(y_u, x.cos() * u)
    assert_close(y_v, x.cos() * v)
    assert_close(y_uv, -x.sin() * u * v)


def test_three_levels_give_the_third_derivative():
    x, u, v, w = randn(4), randn(4), randn(4), randn(4)
    with dual_fwAD.dual_level(), dual_fwAD.dual_level(), dual_fwAD.dual_level():
        a = dual_fwAD.make_dual(x, u, level=0)
        b = dual_fwAD.make_dual(a, v, level=1)
        y = MySin.apply(dual_fwAD.make_dual(b, w, level=2))
        y_w = dual_fwAD.unpack_dual(y, level=2).tangent
        y_wv = dual_fwAD.unpack_dual(y_w, level=1).tangent
        y_wvu = dual_fwAD.unpack_dual(y_wv, level=0).tangent
    assert_close(y_wvu, -x.cos() * u * v * w)


@pytest.mark.parametrize(
    "function",
    [CtxExpInternal.apply, lambda x: MulInPlace.apply(x.clone(), x.sin())],
    ids=["save_for_forward", "mark_dirty"],
)
def test_nested_forward_ctx_saving_an_internal_tensor_asks_for_setup_context(function):
    with pytest.raises(NotImplementedError, match="nested dual levels.*setup_context"):
        nested(function, randn(3), randn(3), randn(3))
    # outer-level tangents only: fine
    nested(function, randn(3), randn(3), None)
