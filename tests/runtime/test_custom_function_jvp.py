"""Custom autograd.Functions under dualgen: the user's jvp is used, and called with
native's arguments. Both styles (`forward(ctx, ...)` and `setup_context`), one
tangent per input (zeros where materialized, None with
`set_materialize_grads(False)` and for non-tensor inputs), keyword arguments,
several and non-tensor outputs, `mark_non_differentiable`, complex inputs, the
tangent dtype the jvp returns; against native forward AD.
"""

from __future__ import annotations

import pytest
import torch
from autograd_functions import function, product_forward
from custom_function_checks import (
    RECEIVED,
    STE,
    CtxMul,
    SetupMul,
    SinCos,
    SortNonDiff,
    clean_state,  # noqa: F401 - autouse
    function_with,
    jvp_of,
    randn,
    run_both,
    seen,
    skip_without_keywords,
)
from torch.autograd.function import Function
from torch.testing import assert_close


def _product_jvp(ctx, xt, yt):
    RECEIVED.append(seen([xt, yt]))
    x, y = ctx.saved_tensors
    out = None if xt is None else xt * y
    if yt is not None:
        out = x * yt if out is None else out + x * yt
    return out


Unmaterialized = function(
    "Unmaterialized",
    product_forward(materialize=False),
    jvp=_product_jvp,
    doc="set_materialize_grads(False): jvp gets None for inputs without tangents.",
)


# --------------------------------------------------------------------------------------
# the jvp is used, with native's arguments


def test_straight_through_estimator_tangent_is_the_input_tangent():
    x, t = randn(5) * 3, randn(5)
    primal, tangent = run_both(jvp_of(STE.apply, (x, t)))
    assert_close(primal, x.round())
    assert_close(tangent, t)  # the jvp's, not round's derivative (0)


@pytest.mark.parametrize("fn", [CtxMul, SetupMul], ids=["ctx", "setup_context"])
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda F, x, y: F.apply(x, y), id="positional"),
        pytest.param(lambda F, x, y: F.apply(x, y, 3.0), id="scale"),
        pytest.param(
            lambda F, x, y: F.apply(x, y=y), id="y-keyword", marks=skip_without_keywords
        ),
        pytest.param(
            lambda F, x, y: F.apply(x, y, 2.0, shift=x),
            id="shift-keyword",
            marks=skip_without_keywords,
        ),
        pytest.param(
            lambda F, x, y: F.apply(x, scale=0.5, y=y),
            id="keywords",
            marks=skip_without_keywords,
        ),
    ],
)
@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_jvp_gets_one_tangent_per_input(fn, call, which):
    """Inputs without tangents get zeros (materialize_grads), non-tensors None."""
    x, y = randn(3), randn(3)
    tx = randn(3) if which != "y" else None
    ty = randn(3) if which != "x" else None

    def program(fwAD):
        RECEIVED.clear()
        result = jvp_of(lambda a, b: call(fn, a, b), (x, tx), (y, ty))(fwAD)
        return result, list(RECEIVED)

    run_both(program)


@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_unmaterialized_jvp_gets_none_for_inputs_without_tangents(which):
    x, y = randn(3), randn(3)
    tx = randn(3) if which != "y" else None
    ty = randn(3) if which != "x" else None

    def program(fwAD):
        RECEIVED.clear()
        result = jvp_of(Unmaterialized.apply, (x, tx), (y, ty))(fwAD)
        return result, list(RECEIVED)

    run_both(program)


def test_jvp_gets_none_for_integer_and_non_tensor_inputs():
    """A tensor inside a list is no input: its tangent is neither passed nor seen."""

    class F(Function):
        @staticmethod
        def forward(ctx, x, index, items, n):
            ctx.index, ctx.n = index, n
            return x[index] * n + items[0]

        @staticmethod
        def jvp(ctx, *tangents):
            RECEIVED.append(seen(tangents))
            return tangents[0][ctx.index] * ctx.n

    def program(fwAD):
        RECEIVED.clear()
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(3), randn(3))
            item = fwAD.make_dual(randn(2), randn(2))
            out = F.apply(x, torch.tensor([2, 0]), [item], 3)
            return fwAD.unpack_dual(out), list(RECEIVED)

    run_both(program)


def test_several_outputs_with_non_tensor_and_integer_outputs():
    x, t = randn(4), randn(4)
    sin, label, _, argmax, seven = run_both(
        jvp_of(lambda a: SinCos.apply(a, "label"), (x, t))
    )
    assert label == "label" and seven == 7 and argmax[1] is None
    assert_close(sin[1], t * x.cos())


def test_mark_non_differentiable_output_has_no_tangent():
    x, t = randn(2, 5), randn(2, 5)
    values, positions = run_both(jvp_of(SortNonDiff.apply, (x, t)))
    assert positions[1] is None and values[1] is not None


def test_complex_function():
    x, t = randn(3, dtype=torch.complex128), randn(3, dtype=torch.complex128)
    y = randn(3, dtype=torch.complex128)
    run_both(jvp_of(lambda a, b: SetupMul.apply(a, b), (x, t), (y, None)))


def test_tangent_dtype_is_kept_as_the_jvp_returns_it():
    fn = function_with(lambda x: x * 2, lambda t: (2 * t).to(torch.float32))
    _, tangent = run_both(jvp_of(fn.apply, (randn(3), randn(3))))
    assert tangent.dtype == torch.float32
