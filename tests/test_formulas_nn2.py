"""The helpers of dualgen.formulas added by part `nn2` (binary_cross_entropy_with_logits,
_trilinear, as_strided_scatter), each against torch's own autograd of the op it
serves, or the adjoint identity of the op's forward where torch's backward is wrong;
float64, and complex128 where the op supports it."""

from __future__ import annotations

import pytest
import torch

from dualgen import formulas as F

R, C = torch.float64, torch.complex128


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **kw)


def vjp(fn, inputs, grad):
    """torch.autograd.grad of fn at `inputs` (zeros for an input it does not use)."""
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    return torch.autograd.grad(out, inputs, grad, materialize_grads=True)


def jvp(fn, primals, tangents):
    return torch.func.jvp(fn, tuple(primals), tuple(tangents))[1]


# ---------------------------------------------------------------- bce with logits

BCE_CASES = [
    (None, None),
    ((3, 4), None),
    (None, (4,)),
    ((3, 4), (3, 4)),
]


@pytest.mark.parametrize("weight_shape, pos_weight_shape", BCE_CASES)
def test_bce_logits_derivatives_match_autograd(weight_shape, pos_weight_shape):
    x = torch.randn(3, 4, dtype=R) * 2
    y = torch.rand(3, 4, dtype=R)
    w = None if weight_shape is None else torch.rand(weight_shape, dtype=R) + 0.5
    pw = (
        None
        if pos_weight_shape is None
        else torch.rand(pos_weight_shape, dtype=R) + 0.5
    )

    def fn(a, b):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            a, b, w, reduction="none", pos_weight=pw
        )

    g = torch.randn(3, 4, dtype=R)
    gx, gy = vjp(fn, [x, y], g)
    close(g * F.bce_logits_self_derivative(x, y, w, pw), gx)
    close(g * F.bce_logits_target_derivative(x, w, pw), gy)
    tx, ty = torch.randn(3, 4, dtype=R), torch.randn(3, 4, dtype=R)
    close(
        F.bce_logits_self_derivative(x, y, w, pw) * tx
        + F.bce_logits_target_derivative(x, w, pw) * ty,
        jvp(fn, [x, y], [tx, ty]),
    )


def test_bce_logits_target_derivative_is_stable_for_large_logits():
    x = torch.tensor([-800.0, 800.0], dtype=R)
    pw = torch.tensor([2.0, 3.0], dtype=R)
    d = F.bce_logits_target_derivative(x, None, pw)
    # -(x + (pw - 1) log sigmoid(x)): pw * 800 at x = -800, -800 at x = 800
    close(d, torch.tensor([1600.0, -800.0], dtype=R))


# ---------------------------------------------------------------- _trilinear


TRILINEAR_CASES = [
    # F.bilinear's call: (N, in1) x (out, in1, in2) x (N, in2) -> (N, out)
    ((2, 3), (5, 3, 4), (2, 4), [1, 3], [0], [1, 2], [2, 3]),
    ((3, 2), (3, 2), (2,), [], [], [0], [1]),
    ((3, 4), (4,), (3, 4), [], [0], [], [1]),
    ((2, 3), (2, 3), (2, 3), [], [], [], []),
]


def _trilinear_reference(i1, i2, i3, expand1, expand2, expand3, sumdim):
    e = []
    for t, ex in ((i1, expand1), (i2, expand2), (i3, expand3)):
        for d in sorted(ex):
            t = t.unsqueeze(d)
        e.append(t)
    product = e[0] * e[1] * e[2]
    return product.sum(sumdim) if sumdim else product


@pytest.mark.parametrize("dtype", [R, C])
@pytest.mark.parametrize("s1, s2, s3, ex1, ex2, ex3, sumdim", TRILINEAR_CASES)
def test_trilinear_grads_match_autograd(s1, s2, s3, ex1, ex2, ex3, sumdim, dtype):
    inputs = [torch.randn(s, dtype=dtype) for s in (s1, s2, s3)]
    out = torch.ops.aten._trilinear(*inputs, ex1, ex2, ex3, sumdim)
    close(out, _trilinear_reference(*inputs, ex1, ex2, ex3, sumdim))
    g = torch.randn_like(out)
    # torch's _trilinear has no complex autograd: the reference of the same op has.
    fn = (
        (lambda a, b, c: torch.ops.aten._trilinear(a, b, c, ex1, ex2, ex3, sumdim))
        if dtype == R
        else (lambda a, b, c: _trilinear_reference(a, b, c, ex1, ex2, ex3, sumdim))
    )
    expected = vjp(fn, inputs, g)
    got = F.trilinear_grads(g, *inputs, ex1, ex2, ex3, sumdim)
    for a, e, x in zip(got, expected, inputs):
        assert a.shape == x.shape
        close(a, e)


def test_trilinear_grads_of_real_inputs_are_real():
    inputs = [
        torch.randn(2, 3, dtype=R),
        torch.randn(3, dtype=R),
        torch.randn(2, 3, dtype=R),
    ]
    g = torch.randn(2, 3, dtype=C)
    for a in F.trilinear_grads(g, *inputs, [], [0], [], []):
        assert a.dtype == R


# ---------------------------------------------------------------- as_strided_scatter


AS_STRIDED_CASES = [
    ([2, 2], [1, 2], 1),
    ([3, 2], [4, 1], None),
    ([2], [5], 0),
    ([0, 3], [1, 1], 2),
]


@pytest.mark.parametrize("dtype", [R, C])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("size, stride, offset", AS_STRIDED_CASES)
def test_as_strided_scatter_grads_are_the_adjoint(
    size, stride, offset, transposed, dtype
):
    # torch's own backward of as_strided_scatter is wrong for self (in 2.13 it keeps
    # the gradient inside the scattered region, not outside), so the check is the
    # adjoint identity <g, f(u, v)> = <f*(g)_self, u> + <f*(g)_src, v> of the
    # linear forward op, also for a self laid out transposed.
    self = (
        torch.randn(4, 3, dtype=dtype).t()
        if transposed
        else torch.randn(3, 4, dtype=dtype)
    )
    src = torch.randn(size, dtype=dtype)
    result = torch.as_strided_scatter(self, src, size, stride, offset)
    g = torch.randn(result.shape, dtype=dtype)
    gs, gsrc = F.as_strided_scatter_grads(g, result, size, stride, offset)
    assert gs.shape == self.shape and gsrc.shape == src.shape
    u, v = torch.randn_like(self), torch.randn_like(src)
    lhs = torch.vdot(
        g.reshape(-1), torch.as_strided_scatter(u, v, size, stride, offset).reshape(-1)
    )
    rhs = torch.vdot(gs.reshape(-1), u.reshape(-1)) + torch.vdot(
        gsrc.reshape(-1), v.reshape(-1)
    )
    close(lhs, rhs)


def test_as_strided_scatter_grads_by_hand():
    g = torch.arange(1.0, 13.0, dtype=R).reshape(3, 4)
    result = torch.zeros(3, 4, dtype=R)
    gs, gsrc = F.as_strided_scatter_grads(g, result, [2, 2], [1, 2], 1)
    close(gsrc, torch.tensor([[2.0, 4.0], [3.0, 5.0]], dtype=R))
    expected = g.clone().reshape(-1)
    expected[1:5] = 0
    close(gs, expected.reshape(3, 4))
