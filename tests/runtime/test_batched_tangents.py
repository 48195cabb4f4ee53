"""Batched tangents: dualgen.forward_ad under vmap, and gradcheck's batched checks.

Beyond the conformance tests (tests/runtime/test_native_conformance_views.py, section 3):
in-place ops on views inside the vmapped function, both orders of vmap and
dual_level, nested levels, and batched gradcheck verdicts, each against
torch.func.jvp one tangent at a time or native gradcheck.
"""

from __future__ import annotations

import re

import pytest
import torch
from autograd_functions import function, keep_nothing
from native_conformance_checks import (
    F64,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    outcomes,
)
from torch._vmap_internals import _vmap

import dualgen.forward_ad as fwAD

C128 = torch.complex128


def _inplace_on_views(x):
    y = x.clone()
    y[0].mul_(torch.arange(1.0, 4.0, dtype=x.dtype))  # in-place through a view
    y.t()[1].add_(y[:, 0])  # a transposed view, reading another view of y
    plain = torch.zeros(2, 3, dtype=x.dtype)
    plain[1] = y[0]  # a dual written into a view of a plain tensor
    return y.sin() * plain + x.exp()


def _broadcasting(x):
    return torch.ones(5, 2, 3, dtype=x.dtype) * x[0] + x.sum(0)


def _expected(fn, primal, tangents):
    """torch.func.jvp, one tangent at a time."""
    return torch.stack([torch.func.jvp(fn, (primal,), (t,))[1] for t in tangents])


def _jvp_inside(fn, primal):
    def jvp(tangent):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fn(fwAD.make_dual(primal, tangent))).tangent

    return jvp


@pytest.mark.parametrize("fn", [_inplace_on_views, _broadcasting, torch.sin])
@pytest.mark.parametrize("level_outside_vmap", [False, True])
def test_vmapped_tangents_give_the_jvp_of_each(fn, level_outside_vmap):
    primal, tangents = torch.randn(2, 3, dtype=F64), torch.randn(4, 2, 3, dtype=F64)
    if level_outside_vmap:
        with fwAD.dual_level():

            def jvp(tangent):
                return fwAD.unpack_dual(fn(fwAD.make_dual(primal, tangent))).tangent

            result = _vmap(jvp)(tangents)
    else:
        result = _vmap(_jvp_inside(fn, primal))(tangents)
    torch.testing.assert_close(result, _expected(fn, primal, tangents))


def test_vmapped_tangents_of_a_view_of_a_larger_tensor():
    """A primal with an offset into a larger storage, and a tangent of other
    strides, so that it is copied into the primal's layout per batch element."""
    storage = torch.randn(20, dtype=F64)
    primal = storage[2:14].view(3, 4).t()
    tangents = torch.randn(5, 4, 3, dtype=F64)

    def fn(x):
        y = x.clone()
        y[1:].mul_(x[:-1])
        return y.cumsum(0)

    result = _vmap(_jvp_inside(fn, primal))(tangents)
    torch.testing.assert_close(result, _expected(fn, primal, tangents))


def test_nested_levels_with_the_inner_tangents_batched():
    """Forward over forward, the outer level entered outside vmap and the inner
    one inside it with batched tangents u: J u for each u, and the outer level's
    tangent of it, v^T H u, as nested torch.func.jvp. (The other way round, an
    outer tangent batched, needs aten::alias on a batched tangent, which the
    legacy vmap has no batching rule for.)"""
    primal, v = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    us = torch.randn(4, 3, dtype=F64)

    def fn(x):
        return (x.sin() * x.roll(1)).sum()

    def first(x, u):
        return torch.func.jvp(fn, (x,), (u,))[1]

    with fwAD.dual_level():
        x = fwAD.make_dual(primal, v)
        values, tangents = fwAD.unpack_dual(_vmap(_jvp_inside(fn, x))(us))
    torch.testing.assert_close(values, torch.stack([first(primal, u) for u in us]))
    second = [
        torch.func.jvp(lambda p, u=u: first(p, u), (primal,), (v,))[1] for u in us
    ]
    torch.testing.assert_close(tangents, torch.stack(second))


def test_vmap_over_a_dual_with_an_inplace_op_on_its_rows():
    """torch.vmap over a dual tensor: the mode sees the whole tensor, rows and
    all; the tangent follows an in-place op on each row."""
    primal, tangent = torch.randn(4, 3, dtype=F64), torch.randn(4, 3, dtype=F64)

    def row_op(row):
        return row.clone().mul_(row).sin()

    with fwAD.dual_level():
        out = torch.vmap(row_op)(fwAD.make_dual(primal, tangent))
        result = fwAD.unpack_dual(out).tangent
    expected = torch.func.jvp(torch.vmap(row_op), (primal,), (tangent,))[1]
    torch.testing.assert_close(result, expected)


def test_make_dual_under_torch_vmap_refuses_with_a_message_that_names_it():
    primal = torch.randn(3, dtype=F64)
    with pytest.raises(RuntimeError, match="torch.vmap"):
        torch.vmap(_jvp_inside(torch.sin, primal))(torch.eye(3, dtype=F64))


def test_make_dual_of_a_batched_primal_refuses():
    tangent = torch.randn(3, dtype=F64)

    def dual_of(primal):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(primal, tangent)).tangent

    with pytest.raises(RuntimeError, match="[Bb]atch"):
        _vmap(dual_of)(torch.randn(2, 3, dtype=F64))


# --------------------------------------------------------------------------------------
# gradcheck's batched checks against native's verdicts


def _gradcheck(fn, inputs, **options):
    def program(api):
        return api.gradcheck(
            fn,
            tuple(x.detach().requires_grad_() for x in inputs),
            check_forward_ad=True,
            check_batched_grad=True,
            check_batched_forward_grad=True,
            **options,
        )

    return program


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: (x[0] * y, x.abs()),
        lambda x, y: x.clone().mul_(y).sum(0),
    ],
)
def test_gradcheck_batched_checks_pass_for_complex_views_and_inplace_ops(fn):
    inputs = (torch.randn(3, 3, dtype=C128), torch.randn(3, dtype=C128))
    assert conform(_gradcheck(fn, inputs)) is True


def test_gradcheck_batched_forward_check_of_a_conjugate_view_beyond_native():
    """Native fails here (an internal assert on the tangent of the conjugate
    view under vmap, pinned); dualgen's batched tangents match the loop's."""
    inputs = (torch.randn(3, 3, dtype=C128), torch.randn(3, dtype=C128))
    program = _gradcheck(lambda x, y: x.sum(0) * y.conj(), inputs)
    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert not native_ok and "has_fw_view" in str(native), "native works: conform"
    assert dual_ok and dual is True, dual


def _vmap_hostile(where: str):
    """A Function whose jvp or backward writes a batched value into a plain
    tensor, which vmap refuses."""

    def write_into_plain(v):
        return torch.zeros(v.shape, dtype=v.dtype).copy_(v)

    def twice(v, here):
        return 2 * (write_into_plain(v) if where == here else v)

    return function(
        "Scale",
        lambda x: 2 * x,
        setup_context=keep_nothing,
        jvp=lambda ctx, x_t: twice(x_t, "forward"),
        backward=lambda ctx, g: twice(g, "backward"),
    ).apply


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_gradcheck_reports_a_formula_that_fails_under_vmap(where):
    x = torch.randn(3, dtype=F64)
    error = conform(
        _gradcheck(_vmap_hostile(where), (x,), check_undefined_grad=False),
        error=RuntimeError,
        match="While computing batched gradients",
    )
    assert ("forward-mode" in str(error)) == (where == "forward")


def _wrong_under_vmap():
    """A Function whose jvp is right one tangent at a time and wrong for
    batched tangents (it doubles them when they are batched)."""

    def jvp(ctx, x_t):
        batched = torch._C._functorch.is_legacy_batchedtensor(x_t)
        return 2 * x_t if batched else x_t.clone()

    return function(
        "Odd",
        lambda x: x.clone(),
        setup_context=keep_nothing,
        jvp=jvp,
        backward=lambda ctx, g: g,
    ).apply


def test_gradcheck_reports_batched_tangents_that_differ_from_the_loop():
    x = torch.randn(3, dtype=F64)
    program = _gradcheck(_wrong_under_vmap(), (x,), check_undefined_grad=False)
    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert not native_ok and "For output 0 and input 0" in str(native)
    assert not dual_ok and isinstance(dual, type(native))
    assert re.search("For output 0 and input 0.*forward-mode", str(dual), re.DOTALL)
    assert not dualgen_gradcheck_quietly(_wrong_under_vmap(), x)


def dualgen_gradcheck_quietly(fn, x):
    from dualgen import gradcheck

    return gradcheck(
        fn,
        (x.detach().requires_grad_(),),
        check_forward_ad=True,
        check_batched_forward_grad=True,
        check_undefined_grad=False,
        raise_exception=False,
    )


@pytest.mark.parametrize("flag", ["check_batched_grad", "check_batched_forward_grad"])
def test_gradcheck_batched_checks_need_their_mode(flag):
    x = torch.randn(3, dtype=F64)
    mode = {
        "check_batched_grad": {"check_backward_ad": False, "check_forward_ad": True},
        "check_batched_forward_grad": {"check_forward_ad": False},
    }[flag]

    def program(api):
        return api.gradcheck(torch.sin, (x.requires_grad_(),), **{flag: True}, **mode)

    conform(program, error=AssertionError, match=f"Setting {flag}=True requires")
