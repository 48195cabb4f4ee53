"""Nested levels (forward over forward) against nested torch.func.jvp: the first-
and second-order tangents at each level, dual inner tangents, tangents relaid out,
written into plain tensors or updated in place, one level of two, three levels.
The nested run (`nested_tangents`) and the comparison are forward_ad_checks.py's.
"""

from __future__ import annotations

import pytest
import torch
from forward_ad_checks import (
    DTYPE,
    assert_same,
    nested_tangents,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
)
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 8. nested levels (forward-over-forward) against nested torch.func.jvp


NESTED = {
    "sin": lambda x: x.sin(),
    "chain": lambda x: torch.tanh(x.exp() * x) / (1 + x * x),
    "mm_sigmoid": lambda x: torch.sigmoid(x @ x.t()).sum(1),
    "softmax": lambda x: torch.softmax(x * x, -1),
    "log_softmax_mean": lambda x: torch.log_softmax(x, 0).mean(1),
    "views_cat": lambda x: torch.cat([x.t()[1:], x[:1] * x[0]]).pow(3),
    "stack_select": lambda x: torch.stack([x[0], x[:, 1].exp()], 1) * x[2:, :2],
    "sqrt_div": lambda x: (x * x + 1).sqrt() / (x.sin() + 2),
}


def second_order(f, x, u, v):
    """(f(x), J u, J v, d/dx(J u) v) by torch.func."""
    value, jv = torch.func.jvp(f, (x,), (v,))
    ju, second = torch.func.jvp(lambda x: torch.func.jvp(f, (x,), (u,))[1], (x,), (v,))
    return value, ju, jv, second


@pytest.mark.parametrize("name", NESTED)
def test_forward_over_forward(name):
    f = NESTED[name]
    torch.manual_seed(0)
    x, u, v = randn(3, 3), randn(3, 3), randn(3, 3)
    value, ju, jv, second = second_order(f, x, u, v)
    with dual_fwAD.dual_level() as outer:
        xo = dual_fwAD.make_dual(x, v, level=outer)
        with dual_fwAD.dual_level() as inner:
            xi = dual_fwAD.make_dual(xo, u, level=inner)
            y = f(xi)
            primal, inner_tangent = dual_fwAD.unpack_dual(y, level=inner)
            assert_close(primal, value)
            assert_close(inner_tangent, ju)
            # the inner tangent is dual at the outer level: its tangent is 2nd order
            assert_close(
                dual_fwAD.unpack_dual(inner_tangent, level=outer).tangent, second
            )
            # the primal keeps its outer tangent, and y has one too
            assert_close(dual_fwAD.unpack_dual(primal, level=outer).tangent, jv)
            assert_close(dual_fwAD.unpack_dual(y, level=outer).tangent, jv)
            # the input: v at the outer level, u at the inner one
            assert dual_fwAD.unpack_dual(xi, level=inner).tangent is u
            assert_close(dual_fwAD.unpack_dual(xi, level=outer).tangent, v)
        # leaving the inner level keeps the outer tangents
        assert_close(dual_fwAD.unpack_dual(y).tangent, jv)
        assert_close(dual_fwAD.unpack_dual(xi).tangent, v)
        assert_close(dual_fwAD.unpack_dual(inner_tangent).tangent, second)
        with dual_fwAD.dual_level():  # a new inner level sees no old inner tangent
            assert dual_fwAD.unpack_dual(y).tangent is None
        assert_close(dual_fwAD.unpack_dual(f(xi)).tangent, jv)
    assert dual_fwAD.unpack_dual(y).tangent is None


@pytest.mark.parametrize("name", ["chain", "mm_sigmoid", "softmax"])
def test_forward_over_forward_with_dual_inner_tangent(name):
    f = NESTED[name]
    torch.manual_seed(0)
    x, u, v, w = randn(3, 3), randn(3, 3), randn(3, 3), randn(3, 3)
    ju, expected = torch.func.jvp(
        lambda x, u: torch.func.jvp(f, (x,), (u,))[1], (x, u), (v, w)
    )
    with dual_fwAD.dual_level() as outer:
        xo = dual_fwAD.make_dual(x, v)
        with dual_fwAD.dual_level() as inner:
            inner_tangent_in = dual_fwAD.make_dual(u, w, level=outer)
            xi = dual_fwAD.make_dual(xo, inner_tangent_in, level=inner)
            y = f(xi)
            inner_tangent = dual_fwAD.unpack_dual(y, level=inner).tangent
            assert_close(inner_tangent, ju)
            assert_close(
                dual_fwAD.unpack_dual(inner_tangent, level=outer).tangent, expected
            )


def _setitem_into_plain_tensor(x):
    out = torch.zeros(3, 4, dtype=DTYPE)
    out[1] = x[0] * x[0]
    return out


def _inplace(x):
    y = x.clone()
    y.mul_(x.sin())
    y[0].add_(x[1] * 2)
    return y.exp()


# name: (f, the shape of x); tangents relaid out, written into a plain tensor, or
# updated in place.
NESTED_UNUSUAL = {
    "plain_plus_transposed": (
        lambda x: torch.ones(4, 3, dtype=DTYPE) + x.t() * x.t(),
        (3, 4),
    ),
    "transposed_column_times_row": (lambda x: x[:, :1].t() * x[0, :1], (3, 4)),
    "setitem_into_plain_tensor": (_setitem_into_plain_tensor, (3, 4)),
    "inplace": (_inplace, (3, 2)),
}


@pytest.mark.parametrize("name", NESTED_UNUSUAL)
def test_forward_over_forward_matches_nested_jvp(name):
    f, shape = NESTED_UNUSUAL[name]
    torch.manual_seed(0)
    x, u, v = randn(*shape), randn(*shape), randn(*shape)
    _, ju, jv, second = second_order(f, x, u, v)
    t, got_jv, got_second = nested_tangents(f, x, u, v)
    assert_close(t, ju)
    assert_close(got_jv, jv)
    assert_same(got_second, second)


def test_inner_level_only():
    """A tensor dual only at the inner level has no outer tangents anywhere."""
    x, u = randn(4), randn(4)
    with dual_fwAD.dual_level() as outer, dual_fwAD.dual_level() as inner:
        y = (dual_fwAD.make_dual(x, u, level=inner).exp() * 3).sum()
        y_t = dual_fwAD.unpack_dual(y, level=inner).tangent
        assert_close(y_t, (u * x.exp() * 3).sum())
        assert dual_fwAD.unpack_dual(y, level=outer).tangent is None
        assert dual_fwAD.unpack_dual(y_t, level=outer).tangent is None


def test_outer_level_only_inside_inner_level():
    x, v = randn(4), randn(4)
    with dual_fwAD.dual_level():
        xo = dual_fwAD.make_dual(x, v)
        with dual_fwAD.dual_level() as inner:
            y = xo.sin() * xo
            assert dual_fwAD.unpack_dual(y, level=inner).tangent is None
        _, expected = torch.func.jvp(lambda x: x.sin() * x, (x,), (v,))
        assert_close(dual_fwAD.unpack_dual(y).tangent, expected)


def test_third_order_with_three_levels():
    x, u, v, w = randn(5), randn(5), randn(5), randn(5)
    with dual_fwAD.dual_level() as l0:
        a = dual_fwAD.make_dual(x, w, level=l0)
        with dual_fwAD.dual_level() as l1:
            b = dual_fwAD.make_dual(a, v, level=l1)
            with dual_fwAD.dual_level() as l2:
                c = dual_fwAD.make_dual(b, u, level=l2)
                y = c.sin()
                t2 = dual_fwAD.unpack_dual(y, level=l2).tangent
                t21 = dual_fwAD.unpack_dual(t2, level=l1).tangent
                t210 = dual_fwAD.unpack_dual(t21, level=l0).tangent
    assert_close(t210, -x.cos() * u * v * w)
