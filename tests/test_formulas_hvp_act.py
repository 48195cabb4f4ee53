"""The helpers of dualgen.formulas for the backward ops of activations and losses
(forward-over-reverse), each against torch's own double backward (autograd twice, or
torch.func.jvp) of the op it serves; float64 only (torch's kernels of these ops have
no complex support)."""

from __future__ import annotations

import pytest
import torch

from dualgen import formulas as F

R = torch.float64


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **kw)


def second_derivative(fn, x):
    """The element-wise second derivative of an element-wise function fn at x."""
    x = x.detach().clone().requires_grad_()
    (d1,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), x)
    return d2


def away_from_zero(*shape):
    x = torch.randn(*shape, dtype=R)
    return x + x.sign() * 0.1


@pytest.mark.parametrize(
    "alpha, scale, input_scale", [(1.0, 1.0, 1.0), (0.5, 1.5, 2.0), (2.5, 1.0, 0.4)]
)
def test_elu_second_derivative_of_the_input_matches_autograd(alpha, scale, input_scale):
    x = away_from_zero(5, 4)
    expected = second_derivative(
        lambda t: torch.ops.aten.elu(t, alpha, scale, input_scale), x
    )
    close(F.elu_second_derivative(x, alpha, scale, input_scale, False), expected)


@pytest.mark.parametrize(
    "alpha, scale, input_scale", [(1.0, 1.0, 1.0), (0.5, 1.5, 2.0)]
)
def test_elu_second_derivative_of_the_result_matches_autograd(
    alpha, scale, input_scale
):
    # elu_backward reading elu's result y: its derivative in y, weighted by grad_output.
    y = torch.ops.aten.elu(away_from_zero(5, 4), alpha, scale, input_scale)
    go = torch.randn(5, 4, dtype=R)
    leaf = y.clone().requires_grad_()
    out = torch.ops.aten.elu_backward(go, alpha, scale, input_scale, True, leaf)
    (expected,) = torch.autograd.grad(out.sum(), leaf)
    got = go * F.elu_second_derivative(y, alpha, scale, input_scale, True)
    close(got, expected)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_derivative_matches_autograd(approximate):
    x = torch.randn(6, 5, dtype=R) * 2
    expected = second_derivative(
        lambda t: torch.nn.functional.gelu(t, approximate=approximate), x
    )
    close(F.gelu_second_derivative(x, approximate), expected)


def test_mish_second_derivative_matches_autograd():
    x = torch.randn(6, 5, dtype=R) * 3
    expected = second_derivative(torch.nn.functional.mish, x)
    close(F.mish_second_derivative(x), expected)


@pytest.mark.parametrize("shape, dim", [((3, 4), -1), ((4, 3), 0), ((2, 6, 3), 1)])
def test_glu_tangent_matches_jvp(shape, dim):
    x, t = torch.randn(shape, dtype=R), torch.randn(shape, dtype=R)
    _, expected = torch.func.jvp(lambda a: torch.nn.functional.glu(a, dim), (x,), (t,))
    close(F.glu_tangent(t, x, dim), expected)


@pytest.mark.parametrize("shape, dim", [((3, 4), -1), ((4, 3), 0), ((2, 6, 3), 1)])
def test_glu_double_backward_matches_autograd(shape, dim):
    x = torch.randn(shape, dtype=R)
    half = list(shape)
    half[dim] //= 2
    go, grad = torch.randn(half, dtype=R), torch.randn(shape, dtype=R)
    leaf = x.clone().requires_grad_()
    out = torch.ops.aten.glu_backward(go, leaf, dim)
    (expected,) = torch.autograd.grad(out, leaf, grad)
    close(F.glu_double_backward(grad, go, x, dim), expected)
    # The Hessian is symmetric: the same helper is the tangent's term.
    _, jvp = torch.func.jvp(
        lambda a: torch.ops.aten.glu_backward(go, a, dim), (x,), (grad,)
    )
    close(F.glu_double_backward(grad, go, x, dim), jvp)


@pytest.mark.parametrize("weighted", [False, True])
def test_bce_second_derivatives_match_autograd(weighted):
    x = torch.rand(4, 3, dtype=R) * 0.8 + 0.1
    y = torch.rand(4, 3, dtype=R)
    w = torch.rand(4, 3, dtype=R) + 0.5 if weighted else None
    xl, yl = x.clone().requires_grad_(), y.clone().requires_grad_()
    loss = torch.nn.functional.binary_cross_entropy(xl, yl, w, reduction="sum")
    (d1,) = torch.autograd.grad(loss, xl, create_graph=True)
    dxx, dxy = torch.autograd.grad(d1.sum(), (xl, yl))
    close(F.bce_self_second_derivative(x, y, w), dxx)
    close(F.bce_cross_derivative(x, w), dxy)
