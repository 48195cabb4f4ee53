"""Custom autograd.Functions under dualgen: in-place outputs (`mark_dirty`, on
inputs with and without tangents, on views), view outputs and inputs returned
as-is (their tangents are views of the input's tangent), and non-differentiable
outputs; against native forward AD.
"""

from __future__ import annotations

import pytest
from custom_function_checks import (
    Diagonal,
    GradReverse,
    Identity,
    MulInPlace,
    clean_state,  # noqa: F401 - autouse
    jvp_of,
    randn,
    run_both,
)
from torch.autograd.function import Function
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# in-place, views, inputs returned as-is


def test_mark_dirty_updates_the_tangent_in_place():
    x, tx, y, ty = randn(4), randn(4), randn(4), randn(4)

    def program(fwAD):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.clone(), tx.clone())
            a = dual.clone()  # not a leaf
            tangent_before = fwAD.unpack_dual(a).tangent
            out = MulInPlace.apply(a, fwAD.make_dual(y.clone(), ty.clone()))
            assert out is a
            tangent = fwAD.unpack_dual(a).tangent
            # for both engines: the very tensor, updated in place
            return fwAD.unpack_dual(out), tangent is tangent_before

    _, same = run_both(program)
    assert same


def test_mark_dirty_on_an_input_without_tangent_gives_it_one():
    x, y, ty = randn(4), randn(4), randn(4)
    run_both(jvp_of(lambda a, b: MulInPlace.apply(a, b), (x, None), (y, ty)))


def test_mark_dirty_on_a_view_updates_the_base_tangent():
    x, tx, y, ty = randn(2, 3), randn(2, 3), randn(3), randn(3)

    def program(fwAD):
        with fwAD.dual_level():
            base = fwAD.make_dual(x.clone(), tx.clone()).clone()
            MulInPlace.apply(base[1], fwAD.make_dual(y.clone(), ty.clone()))
            return fwAD.unpack_dual(base)

    run_both(program)


@pytest.mark.parametrize(
    "fn, shape",
    [(Diagonal, (3, 3)), (Identity, (2, 3)), (GradReverse, (4,))],
    ids=["diagonal", "input-as-is", "view_as"],
)
def test_view_outputs_get_views_of_the_input_tangent(fn, shape):
    x, t = randn(*shape), randn(*shape)
    args = (1.0,) if fn is GradReverse else ()

    def program(fwAD):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.clone(), t.clone())
            out = fn.apply(dual, *args)
            tangent = fwAD.unpack_dual(out).tangent
            shares = tangent.untyped_storage().data_ptr() == (
                fwAD.unpack_dual(dual).tangent.untyped_storage().data_ptr()
            )
            return fwAD.unpack_dual(out), out._base is not None, shares

    run_both(program)


def test_view_output_of_an_input_without_tangent_gets_the_jvp_tangent():
    class F(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x[0], y * 2

        @staticmethod
        def jvp(ctx, xt, yt):
            return xt[0], yt * 2

    x, y, ty = randn(2, 3), randn(3), randn(3)

    def program(fwAD):
        with fwAD.dual_level():
            base = x.clone()
            view, double = F.apply(base, fwAD.make_dual(y.clone(), ty.clone()))
            return [fwAD.unpack_dual(t) for t in (view, base, double)]

    # the view's tangent lives on its base, as native
    view, base = run_both(lambda fwAD: program(fwAD)[:2])
    assert view[1] is not None and base[1] is not None
    # Native returns from its loop over outputs after such a view, so `double`
    # gets no tangent there; dualgen gives every later output its tangent.
    _, _, (_, double_tangent) = program(dual_fwAD)
    assert_close(double_tangent, 2 * ty)


NON_DIFFERENTIABLE_OUTPUTS = {
    "input-as-is": lambda x: x,
    "view": lambda x: x[0],
    "view_as": lambda x: x.view_as(x),
    "detached": lambda x: x.detach(),
    "detached-view": lambda x: x.detach()[0],
    "computed": lambda x: x * 2,
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", list(NON_DIFFERENTIABLE_OUTPUTS))
def test_non_differentiable_outputs(case, requires_grad):
    """As native: no tangent from the jvp, but a view of an input (an input
    returned as-is included) still sees the input's tangent through its base."""
    forward = NON_DIFFERENTIABLE_OUTPUTS[case]

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            out = forward(x)
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def jvp(ctx, t):
            return None

    def program(fwAD):
        with fwAD.dual_level():
            p = randn(2, 3, requires_grad=requires_grad)
            out = F.apply(fwAD.make_dual(p, randn(2, 3)))
            return fwAD.unpack_dual(out), out.requires_grad

    run_both(program)
