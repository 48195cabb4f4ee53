"""Custom autograd.Functions with a jvp inside models, against native forward AD:
input and parameter tangents through `nn.Module`s with gradient reversal,
gradient clipping, straight-through estimators and a sin Function;
reverse-over-forward through a model and through a Function and its tangent; the
user's backward of a Function applied inside a level; `no_grad`; and
torch.utils.checkpoint (reentrant or not, the weight as an argument or in the
closure) against the direct call.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from custom_function_checks import (
    DTYPE,
    STE,
    GradReverse,
    MySin,
    assert_same,
    clean_state,  # noqa: F401 - autouse
    jvp_of,
    randn,
    run_both,
)
from devices import DEVICE
from torch import nn
from torch.autograd.function import Function
from torch.utils.checkpoint import checkpoint

import dualgen.forward_ad as dual_fwAD


class GradClip(Function):
    """Identity forward (a copy), gradient clamped backward."""

    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.clamp(-ctx.bound, ctx.bound), None

    @staticmethod
    def jvp(ctx, t, _):
        return t


# --------------------------------------------------------------------------------------
# models, reverse-over-forward (functions with jvp, against native)


class Net(nn.Module):
    def __init__(self, middle):
        super().__init__()
        self.first = nn.Linear(4, 6, dtype=DTYPE)
        self.second = nn.Linear(6, 2, dtype=DTYPE)
        self.middle = middle

    def forward(self, x):
        return self.second(torch.tanh(self.middle(self.first(x))))


MIDDLES = {
    "grad-reverse": lambda h: GradReverse.apply(h, 0.5),
    "grad-clip": lambda h: GradClip.apply(h, 0.1),
    "ste": STE.apply,
    "sin": MySin.apply,
}


@pytest.mark.parametrize("middle", list(MIDDLES))
def test_model_with_input_and_parameter_tangents(middle):
    torch.manual_seed(0)
    net = Net(MIDDLES[middle])
    x, tx = randn(3, 4), randn(3, 4)
    tangents = {name: torch.randn_like(p) for name, p in net.named_parameters()}

    def program(fwAD):
        with fwAD.dual_level():
            params = {
                name: fwAD.make_dual(p.detach(), tangents[name])
                for name, p in net.named_parameters()
            }
            out = torch.func.functional_call(net, params, (fwAD.make_dual(x, tx),))
            return fwAD.unpack_dual(out)

    run_both(program)


@pytest.mark.parametrize("middle", list(MIDDLES))
def test_reverse_over_forward_through_a_model(middle):
    torch.manual_seed(0)
    net = Net(MIDDLES[middle])
    x, tx = randn(3, 4), randn(3, 4)

    def program(fwAD):
        params = list(net.parameters())
        with fwAD.dual_level():
            out = net(fwAD.make_dual(x, tx))
            primal, tangent = fwAD.unpack_dual(out)
            loss = (tangent**2).sum() + primal.sum()
            return primal, tangent, torch.autograd.grad(loss, params)

    run_both(program)


def test_reverse_over_forward_through_the_function_and_its_tangent():
    x, t = randn(4), randn(4)

    def program(fwAD):
        xr, tr = x.clone().requires_grad_(), t.clone().requires_grad_()
        with fwAD.dual_level():
            primal, tangent = fwAD.unpack_dual(MySin.apply(fwAD.make_dual(xr, tr)))
            (tangent * primal).sum().backward()
        return primal, tangent, xr.grad, tr.grad

    run_both(program)


def test_backward_of_a_function_applied_inside_a_level_is_the_users():
    x, t = randn(4) * 3, randn(4)

    def program(fwAD):
        xr = x.clone().requires_grad_()
        with fwAD.dual_level():
            out = STE.apply(fwAD.make_dual(xr, t))
            kind = type(out.grad_fn).__name__
            (out * torch.arange(4.0, dtype=DTYPE)).sum().backward()
        return kind, xr.grad

    kind, grad = run_both(program)
    assert kind == "STEBackward" and grad.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_no_grad_inside_the_level_still_gives_tangents():
    def program(fwAD):
        with torch.no_grad():
            return jvp_of(MySin.apply, (randn(3), randn(3)))(fwAD)

    run_both(program)


# --------------------------------------------------------------------------------------
# torch.utils.checkpoint


def block(x, weight):
    return (torch.tanh(x @ weight) * x.sin()).cumsum(-1)


def _layers(x, weight):
    """Ops that save their inputs (matmul), their outputs (tanh, exp) or both."""
    for _ in range(3):
        x = torch.tanh(x @ weight).exp() * 0.5
    return x


@pytest.mark.parametrize("twice", [False, True], ids=["once", "retained-graph"])
def test_forward_over_reverse_through_checkpoint_matches_finite_differences(
    backend, twice
):
    """The tangent of a gradient taken through a non-reentrant checkpoint inside
    a level (its backward recomputes the values it let go, tangents included)
    against central differences of the gradient, in float64: before
    checkpointing.py it was off by hundreds, with no error. A retained graph
    recomputes again on the second backward."""
    g = torch.Generator(DEVICE).manual_seed(3)
    w0 = torch.randn(16, 16, generator=g, dtype=torch.float64) / 5
    x, tx = (torch.randn(4, 16, generator=g, dtype=torch.float64) for _ in range(2))
    tw = torch.randn(16, 16, generator=g, dtype=torch.float64)

    def gradient(e):
        w = (w0 + e * tw).requires_grad_()
        return torch.autograd.grad(_layers(x + e * tx, w).square().sum(), w)[0]

    eps = 1e-6
    expected = (gradient(eps) - gradient(-eps)) / (2 * eps)
    w = w0.clone().requires_grad_()
    with dual_fwAD.dual_level():
        dual_x, dual_w = dual_fwAD.make_dual(x, tx), dual_fwAD.make_dual(w, tw)
        out = checkpoint(_layers, dual_x, dual_w, use_reentrant=False)
        loss = out.square().sum()
        for _ in range(2 if twice else 1):
            (grad,) = torch.autograd.grad(loss, w, retain_graph=twice)
            tangent = dual_fwAD.unpack_dual(grad).tangent
            torch.testing.assert_close(tangent, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("closure", [False, True], ids=["arguments", "closure"])
@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_checkpoint_tangents_and_gradients_equal_the_direct_call(reentrant, closure):
    """Also with the weight (with its tangent) read from the function's closure,
    which native's reentrant checkpoint drops (and it has no jvp)."""
    x, tx, w, tw = randn(3, 4), randn(3, 4), randn(4, 4), randn(4, 4)

    def program(fwAD, use_checkpoint):
        leaf = w.clone().requires_grad_()
        with fwAD.dual_level():
            inputs = [fwAD.make_dual(x, tx), fwAD.make_dual(leaf, tw)]
            fn = block
            if closure:
                weight = inputs.pop()
                fn = lambda a: block(a, weight)
            if use_checkpoint:
                out = checkpoint(fn, *inputs, use_reentrant=reentrant)
            else:
                out = fn(*inputs)
            primal, tangent = fwAD.unpack_dual(out)
            (grad,) = torch.autograd.grad((primal + tangent**2).sum(), leaf)
            return primal, tangent, grad

    expected = program(native_fwAD, False)
    assert_same(program(dual_fwAD, True), expected)
    if not reentrant:
        assert_same(program(native_fwAD, True), expected)
