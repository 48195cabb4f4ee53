"""Conformance with PyTorch's forward-AD tests: custom `autograd.Function`s.

From the forward-AD tests of `TestAutograd` in pytorch/pytorch
`test/test_autograd.py`, in our own words: what is asked of `jvp` for view,
in-place (`mark_dirty`) and non-differentiable outputs, outputs returned as-is,
`save_for_forward`, non-tensor arguments, wrong formulas caught by gradcheck.
Programs run under native PyTorch and dualgen through `conform`; see
`tests/runtime/native_conformance_checks.py`.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from forward_ad_checks import assert_same
from native_conformance_checks import (
    DUALGEN,
    F64,
    NATIVE,
    _outcome,
    conform,
    forward_mismatch,
    no_level_left_behind,  # noqa: F401 - autouse
)
from torch.autograd import Function

# --------------------------------------------------------------------------------------
# 1. custom Functions: what is asked of jvp


def test_function_without_jvp_or_backward_raises_naming_it():
    """Deliberate difference: native asks for a jvp ("must implement the jvp
    function"); dualgen, which can also derive a JVP from `backward`, raises an
    error that names the Function and both fixes (a `jvp`, or register_jvp)."""

    class OnlyForward(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

    def program(api):
        with api.fwAD.dual_level():
            x = torch.rand(1, dtype=F64, requires_grad=True)
            OnlyForward.apply(api.fwAD.make_dual(x, torch.rand_like(x)))

    native_ok, native = _outcome(program, NATIVE, 0)
    assert not native_ok and "must implement the jvp function" in str(native)
    with pytest.raises(Exception, match="OnlyForward") as caught:
        program(DUALGEN)
    assert "jvp" in str(caught.value) and "register_jvp" in str(caught.value)


def test_function_with_backward_but_no_jvp_gets_a_derived_jvp():
    """Deliberate difference: native raises "must implement the jvp function";
    dualgen derives J t from the user's backward (docs/differences.md)."""

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * grad

    def program(api):
        x, t = torch.randn(4, dtype=F64), torch.randn(4, dtype=F64)
        with api.fwAD.dual_level():
            out = Cube.apply(api.fwAD.make_dual(x, t))
            return x, t, api.fwAD.unpack_dual(out).tangent

    native_ok, native = _outcome(program, NATIVE, 0)
    assert not native_ok and "must implement the jvp function" in str(native)
    x, t, tangent = program(DUALGEN)
    assert_same(tangent, 3 * x**2 * t, "tangent")


VIEW_ERRORS = {
    "ok": None,
    "not_a_view": "jvp is not returning a view",
    "not_a_view_of_inp": "jvp is not returning a view of the given",
    "not_a_view_of_inp_base": "jvp is not returning a view of the same base",
}
VIEW_FLAGS = [
    "ok",
    "not_a_view",
    "not_a_view_of_inp",
    "not_a_view_of_inp_base",
]


@pytest.mark.parametrize("flag", VIEW_FLAGS)
def test_function_returning_a_view_needs_a_jvp_returning_the_same_view(flag):
    class Narrow(Function):
        @staticmethod
        def forward(ctx, x, flag):
            ctx.flag, ctx.size = flag, x.size()
            return x.narrow(0, 0, 2)

        @staticmethod
        def vjp(ctx, grad):
            grad_in = grad.new_zeros(ctx.size)
            grad_in.narrow(0, 0, 2).copy_(grad)
            return grad_in, None

        @staticmethod
        def jvp(ctx, x_t, _):
            out = x_t.narrow(0, 0, 2)
            if ctx.flag != "ok":
                out = out.clone()
            if ctx.flag in ("not_a_view_of_inp", "not_a_view_of_inp_base"):
                out = out.view_as(out)
            return out

    def func(x):
        if flag == "not_a_view_of_inp_base":
            x = x.view_as(x)
        return Narrow.apply(x, flag)

    def program(api):
        x = torch.rand(4, 4, dtype=F64, requires_grad=True)
        return api.gradcheck(func, x, check_forward_ad=True)

    if VIEW_ERRORS[flag] is None:
        assert conform(program) is True
    else:
        conform(program, error=RuntimeError, match=VIEW_ERRORS[flag])


@pytest.mark.parametrize("in_place", [True, False])
def test_function_marking_its_input_dirty_needs_an_in_place_jvp(in_place):
    class Double(Function):
        @staticmethod
        def forward(ctx, x, in_place):
            ctx.mark_dirty(x)
            ctx.in_place = in_place
            return x.mul_(2)

        @staticmethod
        def vjp(ctx, grad):
            return 2 * grad, None

        @staticmethod
        def jvp(ctx, x_t, _):
            return x_t.mul_(2) if ctx.in_place else 2 * x_t

    def program(api):
        x = torch.rand(4, 4, dtype=F64, requires_grad=True)
        return api.gradcheck(
            lambda x, flag: Double.apply(x.clone(), flag),
            (x, in_place),
            check_forward_ad=True,
        )

    if in_place:
        assert conform(program) is True
    else:
        conform(
            program,
            error=RuntimeError,
            match="inplace custom Function is not modifying the forward mode "
            "gradients inplace",
        )


@pytest.mark.parametrize("jvp_in_place", [True, False])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_dirty_input_is_returned_as_is_with_its_tangent_updated(
    requires_grad, jvp_in_place
):
    class InplaceMul(Function):
        @staticmethod
        def forward(ctx, x):
            out = x.mul_(2)
            ctx.mark_dirty(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            return None

        @staticmethod
        def jvp(ctx, x_t):
            return x_t.mul_(2) if jvp_in_place else x_t

    def program(api):
        x = torch.tensor(1.0, dtype=F64, requires_grad=requires_grad).clone()
        with api.fwAD.dual_level():
            tangent = torch.ones_like(x)
            dual = api.fwAD.make_dual(x, tangent)
            out = InplaceMul.apply(dual)
            return (
                out is dual,
                api.fwAD.unpack_dual(out).tangent is tangent,
                tuple(api.fwAD.unpack_dual(out)),
            )

    if jvp_in_place:
        assert conform(program)[:2] == (True, True)
    else:
        conform(
            program,
            error=RuntimeError,
            match="jvp function must modify the corresponding gradient inplace",
        )


@pytest.mark.parametrize("wrong", [False, True])
def test_gradcheck_catches_a_wrong_jvp_of_a_function(wrong):
    class Twice(Function):
        @staticmethod
        def forward(ctx, x, wrong):
            ctx.wrong = wrong
            return x * 2

        @staticmethod
        def vjp(ctx, grad):
            return 2 * grad, None

        @staticmethod
        def jvp(ctx, x_t, _):
            return (3 if ctx.wrong else 2) * x_t

    def program(api):
        x = torch.rand(10, dtype=F64, requires_grad=True)
        return api.gradcheck(Twice.apply, (x, wrong), check_forward_ad=True)

    if wrong:
        conform(program, error=RuntimeError, match=forward_mismatch(0))
    else:
        assert conform(program) is True


class Mixed(Function):
    """Non-tensor arguments before and between the tensors."""

    seen: ClassVar[list] = []

    @staticmethod
    def forward(ctx, n, x, m, y):
        return x * 2 + y * 3

    @staticmethod
    def jvp(ctx, n_t, x_t, m_t, y_t):
        Mixed.seen.append((n_t, m_t, y_t))
        return x_t * 2 + (0 if y_t is None else y_t * 3)


def test_function_jvp_gets_none_for_non_tensor_arguments():
    def program(api):
        Mixed.seen = []
        x, y = torch.tensor(1.0, dtype=F64), torch.tensor(1.0, dtype=F64)
        with api.fwAD.dual_level():
            out = Mixed.apply(
                1, api.fwAD.make_dual(x, torch.tensor(1.0, dtype=F64)), 1, y
            )
            result = tuple(api.fwAD.unpack_dual(out))
        return result, Mixed.seen

    seen = conform(program)[1]
    assert [(n_t, m_t) for n_t, m_t, _ in seen] == [(None, None)]


def test_gradcheck_of_a_function_with_non_tensor_arguments_before_tensors():
    def program(api):
        x = torch.tensor(1.0, dtype=F64, requires_grad=True)
        y = torch.tensor(1.0, dtype=F64, requires_grad=True)
        return api.gradcheck(
            Mixed.apply,
            (1, x, 1, y),
            check_forward_ad=True,
            check_backward_ad=False,
            check_batched_grad=False,
        )

    assert conform(program) is True


def _returns_input_as_is(second_tangent):
    class PassThrough(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y, x

        @staticmethod
        def vjp(ctx, g1, g2):
            return g1 + g2, g1

        @staticmethod
        def jvp(ctx, x_t, y_t):
            return x_t + y_t, second_tangent(x_t)

    return PassThrough


SECOND_TANGENTS = {
    "view_as": lambda t: t.view_as(t),
    "self": lambda t: t,
    "mul_by_2": lambda t: t * 2,
}


@pytest.mark.parametrize("how", ["apply", "gradcheck"])
@pytest.mark.parametrize("second", SECOND_TANGENTS)
def test_function_returning_an_input_as_is_needs_a_view_as_tangent(second, how):
    """forward returns its input `x` as-is, which counts as `x.view_as(x)`: the jvp
    must return `x_t.view_as(x_t)` for it (a view of the given tangent), with
    an input that requires grad or not."""
    PassThrough = _returns_input_as_is(SECOND_TANGENTS[second])

    def program(api):
        a = torch.tensor(1.0, dtype=F64, requires_grad=True)
        c = torch.tensor(1.0, dtype=F64)
        if how == "gradcheck":
            return api.gradcheck(PassThrough.apply, (a, c), check_forward_ad=True)
        bases = []
        with api.fwAD.dual_level():
            for x, y in ((a, torch.tensor(1.0, dtype=F64, requires_grad=True)), (c, c)):
                t = torch.tensor(1.0, dtype=F64)
                _, out = PassThrough.apply(api.fwAD.make_dual(x, t), y)
                bases.append(api.fwAD.unpack_dual(out).tangent._base is t)
        return bases

    if second == "view_as":
        assert conform(program) in (True, [True, True])
    else:
        conform(
            program,
            error=RuntimeError,
            match=r"A custom Function's forward is returning a view \(or an input "
            r"as-is\)",
        )


def test_function_saving_for_forward_reads_saved_tensors_in_jvp():
    class Product(Function):
        @staticmethod
        def forward(ctx, x, y, z):
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(x, y)
            ctx.z = z
            return z * x * y

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            x, y = ctx.saved_tensors
            return ctx.z * (y * x_t + x * y_t)

        @staticmethod
        def vjp(ctx, grad):
            x, y = ctx.saved_tensors
            return ctx.z * grad * y, ctx.z * grad * x, None

    def program(api):
        a = torch.tensor(1.0, dtype=F64, requires_grad=True)
        b = torch.tensor(2.0, dtype=F64, requires_grad=True)
        with api.fwAD.dual_level():
            out = Product.apply(
                api.fwAD.make_dual(a, torch.tensor(1.0, dtype=F64)), b, 4
            )
            out.backward()
            result = tuple(api.fwAD.unpack_dual(out))
        checked = api.gradcheck(Product.apply, (a, b, 4), check_forward_ad=True)
        return result, a.grad, b.grad, checked

    conform(program)


def test_tensors_saved_only_for_backward_are_not_seen_by_jvp():
    class Copy(Function):
        seen: ClassVar[list] = []

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def jvp(ctx, x_t):
            Copy.seen.append(("jvp", len(ctx.saved_tensors)))
            return x_t

        @staticmethod
        def vjp(ctx, grad):
            Copy.seen.append(("vjp", len(ctx.saved_tensors)))
            return grad

    def program(api):
        Copy.seen = []
        a = torch.tensor(1.0, dtype=F64, requires_grad=True)
        with api.fwAD.dual_level():
            out = Copy.apply(api.fwAD.make_dual(a, torch.tensor(1.0, dtype=F64)))
            out.backward()
        checked = api.gradcheck(Copy.apply, (a,), check_forward_ad=True)
        return checked, sorted(set(Copy.seen))

    assert conform(program)[1] == [("jvp", 0), ("vjp", 1)]


def _non_differentiable_cases():
    class Marked(Function):
        @staticmethod
        def forward(ctx, x, y):
            out = y.clone()
            ctx.mark_non_differentiable(out)
            return x.clone(), out

        @staticmethod
        def jvp(ctx, x_t, y_t):
            return x_t, None

    class IntegerOutput(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x.clone(), y.clone()

        @staticmethod
        def jvp(ctx, x_t, y_t):
            assert y_t is None
            return x_t, None

    class MarkedButGivenATangent(Marked):
        @staticmethod
        def jvp(ctx, x_t, y_t):
            return x_t, x_t.clone()

    class NonTensorOutput(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x.clone(), object(), x.clone()

        @staticmethod
        def jvp(ctx, x_t, y_t):
            return x_t, None, x_t

    return {
        "marked": (Marked, torch.tensor(3.0, dtype=F64)),
        "integer": (IntegerOutput, torch.tensor(3)),
        "marked_given_a_tangent": (
            MarkedButGivenATangent,
            torch.tensor(3.0, dtype=F64),
        ),
        "non_tensor": (NonTensorOutput, torch.tensor(3.0, dtype=F64)),
    }


@pytest.mark.parametrize("case", list(_non_differentiable_cases()))
def test_non_differentiable_outputs_of_a_function_get_no_tangent(case):
    cls, y = _non_differentiable_cases()[case]

    def program(api):
        x = torch.tensor(2.0, dtype=F64)
        with api.fwAD.dual_level():
            outs = cls.apply(api.fwAD.make_dual(x, torch.tensor(1.0, dtype=F64)), y)
            return [
                tuple(api.fwAD.unpack_dual(o)) if isinstance(o, torch.Tensor) else None
                for o in outs
            ]

    if case == "marked_given_a_tangent":
        conform(
            program,
            error=RuntimeError,
            match="You should return None at that position instead",
        )
    else:
        conform(program)
