"""Custom autograd.Functions under dualgen.jet: their own jvp, in series
arithmetic, at every order (not the aten ops inside forward)."""

from __future__ import annotations

import pytest
import torch
from autograd_functions import function, keep_nothing

import dualgen

F64 = torch.float64


def _exp_jvp(ctx, x_t):
    (y,) = ctx.saved_tensors
    return y * x_t


def _scaled_sin(ctx, x, scale=2.0):
    ctx.save_for_backward(x)
    ctx.scale = scale
    return scale * x.sin()


def _scaled_sin_jvp(ctx, x_t, scale_t):
    (x,) = ctx.saved_tensors
    return ctx.scale * x.cos() * x_t


StraightThroughRound = function(
    "StraightThroughRound",
    lambda x: x.round(),
    setup_context=keep_nothing,
    jvp=lambda ctx, x_t: x_t,
)
Exp = function(
    "Exp",
    lambda x: x.exp(),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(output),
    jvp=_exp_jvp,
    doc="Saves its output in setup_context; jvp reads it.",
)
ScaledSin = function(
    "ScaledSin",
    _scaled_sin,
    jvp=_scaled_sin_jvp,
    doc="forward(ctx, ...) style, saving an input, with a keyword argument.",
)
NoJvp = function("NoJvp", lambda ctx, x: x * 2, backward=lambda ctx, g: g * 2)


def _curve():
    g = torch.Generator().manual_seed(2)
    x0 = torch.randn(5, dtype=F64, generator=g)
    return x0, [torch.randn(5, dtype=F64, generator=g) for _ in range(3)]


def test_the_functions_jvp_is_used_not_forwards_ops():
    x0, series = _curve()
    value, got = dualgen.jet(StraightThroughRound.apply, (x0,), (series,))
    torch.testing.assert_close(value, x0.round())
    for a, b in zip(got, series):
        torch.testing.assert_close(a, b)  # the identity's derivatives


@pytest.mark.parametrize(
    "function, plain",
    [
        (Exp.apply, torch.exp),
        # (positionally: torch 2.12's apply takes no keywords for forward(ctx, ...))
        (lambda x: ScaledSin.apply(x, 3.0), lambda x: 3.0 * x.sin()),
    ],
)
def test_saved_values_carry_their_series(function, plain):
    x0, series = _curve()
    _, got = dualgen.jet(function, (x0,), (series,))
    _, expected = dualgen.jet(plain, (x0,), (series,))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_a_function_without_jvp_is_refused_by_name():
    x0, series = _curve()
    with pytest.raises(NotImplementedError, match="NoJvp"):
        dualgen.jet(NoJvp.apply, (x0,), (series,))


def test_a_registered_rule_is_used():
    @dualgen.register_jvp(NoJvp)
    def _(ctx, x_t):
        return 2 * x_t

    try:
        x0, series = _curve()
        _, got = dualgen.jet(NoJvp.apply, (x0,), (series,))
        for a, b in zip(got, series):
            torch.testing.assert_close(a, 2 * b)
    finally:
        dualgen.unregister_jvp(NoJvp)
