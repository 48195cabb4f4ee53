"""Custom autograd.Functions without `jvp`, where native forward AD refuses them:
dualgen derives the jvp from `backward` (or `vjp`), and the result must equal
native's with the jvp written out (the class with its jvp against a subclass
without it): several inputs and outputs, non-tensors, `mark_dirty`, views,
reverse-over-derived-forward, `no_grad`, `@once_differentiable` (the function it
wraps). Backwards it cannot derive from (detaching, numpy, raising, wrong count)
give an error
naming the Function and the fixes; `dualgen.register_jvp(MyFunction)` overrides
the jvp, written or derived, until unregistered.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from autograd_functions import function
from custom_function_checks import (
    DTYPE,
    STE,
    DoubleInPlace,
    FirstRow,
    MulExp,
    assert_same,
    clean_state,  # noqa: F401 - autouse
    jvp_of,
    randn,
    times_cos_of_saved,
    unpack_all,
    without_jvp,
)
from torch.autograd.function import Function, once_differentiable
from torch.testing import assert_close

import dualgen
import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# Functions with jvp and backward; dualgen derives the jvp of their twins without


class Scale(Function):
    """x * factor with non-tensor arguments and outputs, setup_context style."""

    @staticmethod
    def forward(x, factor, label):
        return x * factor, label, (x > 0).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]
        ctx.mark_non_differentiable(output[2])

    @staticmethod
    def jvp(ctx, t, _, __):
        return t * ctx.factor, None, None

    @staticmethod
    def backward(ctx, g, _, __):
        return g * ctx.factor, None, None


def _sin_saving_x(ctx, x):
    ctx.save_for_forward(x)
    ctx.save_for_backward(x)
    return x.sin()


SinVjp = function(
    "SinVjp",
    _sin_saving_x,
    jvp=times_cos_of_saved,
    vjp=times_cos_of_saved,
    doc="Overrides vjp instead of backward.",
)


def run_twins(program, cls, seed=0):
    """program(fwAD, F): dualgen with cls's jvp derived from its backward equals
    native with cls's jvp."""
    torch.manual_seed(seed)
    expected = program(native_fwAD, cls)
    torch.manual_seed(seed)
    actual = program(dual_fwAD, without_jvp(cls))
    assert_same(actual, expected)
    return actual


def on_pairs(fn, *pairs):
    """program(fwAD, F) applying F through fn to duals made from pairs."""
    return lambda fwAD, F: jvp_of(lambda *a: fn(F, *a), *pairs)(fwAD)


# --------------------------------------------------------------------------------------
# the jvp derived from backward


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_derived_jvp_with_several_inputs_and_outputs(dtype, which):
    x, y = randn(3, dtype=dtype), randn(3, dtype=dtype)
    tx = randn(3, dtype=dtype) if which != "y" else None
    ty = randn(3, dtype=dtype) if which != "x" else None
    program = on_pairs(lambda F, a, b: F.apply(a, b), (x, tx), (y, ty))
    prod, exp = run_twins(program, MulExp)
    assert prod[1] is not None and exp[1] is not None  # zeros where y alone


def test_derived_jvp_of_a_straight_through_estimator():
    x, t = randn(5) * 3, randn(5)
    _, tangent = jvp_of(without_jvp(STE).apply, (x, t))(dual_fwAD)
    assert_close(tangent, t)


@pytest.mark.parametrize(
    "cls, shape",
    [(Scale, (4,)), (DoubleInPlace, (4,)), (FirstRow, (2, 3)), (SinVjp, (4,))],
    ids=["non-tensors", "mark_dirty", "view", "vjp"],
)
def test_derived_jvp_equals_the_written_one(cls, shape):
    args = (3.0, "label") if cls is Scale else ()

    def program(fwAD, F):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(*shape), randn(*shape)).clone()
            tangent_before = fwAD.unpack_dual(x).tangent
            out = F.apply(x, *args)
            result = unpack_all(fwAD, out)
            return result, fwAD.unpack_dual(x).tangent is tangent_before

    run_twins(program, cls)


def test_function_without_differentiable_outputs_needs_no_jvp():
    class Order(Function):  # neither jvp nor backward: no tangent to derive
        @staticmethod
        def forward(ctx, x):
            return x.argmax(), x.sort().indices

    argmax, indices = jvp_of(Order.apply, (randn(4), randn(4)))(dual_fwAD)
    assert argmax[1] is None and indices[1] is None


def test_reverse_over_derived_forward():
    x, y, tx, ty = randn(3), randn(3), randn(3), randn(3)

    def program(fwAD, F):
        leaves = [v.clone().requires_grad_() for v in (x, y, tx, ty)]
        with fwAD.dual_level():
            a = fwAD.make_dual(leaves[0], leaves[2])
            b = fwAD.make_dual(leaves[1], leaves[3])
            prod, exp = F.apply(a, b)
            tangents = fwAD.unpack_dual(prod).tangent, fwAD.unpack_dual(exp).tangent
            loss = (tangents[0] * tangents[1]).sum() + (prod * exp).sum()
            return tangents, torch.autograd.grad(loss, leaves)

    run_twins(program, MulExp)


def test_derived_jvp_under_no_grad():
    def program(fwAD, F):
        with torch.no_grad():
            return jvp_of(F.apply, (randn(4), randn(4)))(fwAD)

    run_twins(program, SinVjp)


def with_backward(backward, once=False):
    class Broken(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    if backward is not None:
        Broken.backward = staticmethod(
            once_differentiable(backward) if once else backward
        )
    return Broken


def numpy_backward(ctx, g):
    return torch.from_numpy(np.asarray(g.detach()) * 2)


def raising_backward(ctx, g):
    raise ValueError("backward failed")


CANNOT_DERIVE = {
    "no-backward": (
        with_backward(None),
        NotImplementedError,
        "neither a jvp nor a backward",
    ),
    "once_differentiable-numpy": (
        with_backward(numpy_backward, once=True),
        RuntimeError,
        "does not depend differentiably on grad_outputs",
    ),
    "detached": (
        with_backward(lambda ctx, g: 2 * g.detach()),
        RuntimeError,
        "does not depend differentiably on grad_outputs",
    ),
    "numpy": (
        with_backward(numpy_backward),
        RuntimeError,
        "does not depend differentiably on grad_outputs",
    ),
    "raises": (
        with_backward(raising_backward),
        RuntimeError,
        "which raised ValueError: backward failed",
    ),
    "wrong-count": (
        with_backward(lambda ctx, g: (g, g)),
        RuntimeError,
        r"returned an incorrect number of gradients \(expected 1, got 2\)",
    ),
}


def test_once_differentiable_backward_is_differentiated_in_its_grads():
    """@once_differentiable says backward has no derivative in what it saved; it
    is still linear in its grads: the function it wraps gives J t."""
    fn = with_backward(lambda ctx, g: 2 * g, once=True)
    x, t = randn(3), randn(3)
    with dual_fwAD.dual_level():
        out = fn.apply(dual_fwAD.make_dual(x, t))
        torch.testing.assert_close(dual_fwAD.unpack_dual(out).tangent, 2 * t)


@pytest.mark.parametrize("draw", ["dirichlet", "beta"])
def test_dirichlet_and_beta_draws_take_their_backward_jacobian(draw):
    """torch.distributions' _Dirichlet (Dirichlet and Beta rsample) has no jvp and
    a @once_differentiable backward: the tangent is its Jacobian, the one autograd
    gives the same seeded draw (implicit reparameterization)."""
    from torch.distributions import Beta, Dirichlet

    alpha = torch.tensor([0.5, 1.5, 4.0], dtype=torch.float64)
    t = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)

    def sample(a):
        torch.manual_seed(1)
        return (
            Dirichlet(a).rsample()
            if draw == "dirichlet"
            else Beta(a, a.flip(0)).rsample()
        )

    with dual_fwAD.dual_level():
        tangent = dual_fwAD.unpack_dual(sample(dual_fwAD.make_dual(alpha, t))).tangent
    jacobian = torch.autograd.functional.jacobian(sample, alpha)
    torch.testing.assert_close(tangent, jacobian @ t)


@pytest.mark.parametrize("case", list(CANNOT_DERIVE))
def test_underivable_backward_names_the_function_and_the_fixes(case):
    fn, error, reason = CANNOT_DERIVE[case]
    with dual_fwAD.dual_level():
        x = dual_fwAD.make_dual(randn(3), randn(3))
        with pytest.raises(error, match=reason) as info:
            fn.apply(x)
    message = str(info.value)
    assert "Broken" in message and "jvp" in message
    assert "@dualgen.register_jvp(Broken)" in message
    # native refuses every Function without jvp
    with native_fwAD.dual_level(), pytest.raises(NotImplementedError, match="jvp"):
        fn.apply(native_fwAD.make_dual(randn(3), randn(3)))


# --------------------------------------------------------------------------------------
# dualgen.register_jvp (the rules given are unregistered by `registered`, conftest.py)


def test_registered_rule_overrides_the_jvp_until_unregistered(registered):
    x, t = randn(4) * 3, randn(4)

    @dualgen.register_jvp(STE)
    def rule(ctx, tangent):
        return 2 * tangent

    registered.append(STE)
    _, tangent = jvp_of(STE.apply, (x, t))(dual_fwAD)
    assert_close(tangent, 2 * t)
    dualgen.unregister_jvp(STE)
    _, tangent = jvp_of(STE.apply, (x, t))(dual_fwAD)
    assert_close(tangent, t)


def test_registered_rule_for_a_function_without_jvp_or_backward(registered):
    received = []

    class Cube(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_forward(x)
            return x**3 + y

    @dualgen.register_jvp(Cube)
    def rule(ctx, xt, yt):
        received.append([xt is None, yt is None])
        (x,) = ctx.saved_tensors
        return 3 * x**2 * xt + yt

    registered.append(Cube)
    x, t, y = randn(4), randn(4), randn(4)
    _, tangent = jvp_of(Cube.apply, (x, t), (y, None))(dual_fwAD)
    assert_close(tangent, 3 * x**2 * t)
    assert received == [[False, False]]  # zeros for y, as native passes to jvp


def test_registered_rule_overrides_the_derived_jvp(registered):
    ste = without_jvp(STE)

    @dualgen.register_jvp(ste)
    def rule(ctx, tangent):
        return torch.zeros_like(tangent)

    registered.append(ste)
    _, tangent = jvp_of(ste.apply, (randn(3), randn(3)))(dual_fwAD)
    assert_close(tangent, torch.zeros(3, dtype=DTYPE))
