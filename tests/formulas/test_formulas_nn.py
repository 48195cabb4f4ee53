"""The helpers of dualgen.formulas.nn (normalization, losses, dropout, _trilinear),
each against torch's own autograd or forward AD of the op it serves, or hand
values; float64, and complex128 where the op supports it."""

from __future__ import annotations

import math

import pytest
import torch
from formula_checks import C, R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- nn


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_apply_loss_reduction_and_expand_loss_grad(reduction):
    t = torch.randn(3, 4, dtype=R)
    reference = [lambda a: a, lambda a: a.mean(), lambda a: a.sum()][reduction]
    close(F.apply_loss_reduction(t, reduction), reference(t))
    g = torch.randn_like(reference(t))
    (expected,) = vjp(reference, [t], g)
    close(F.expand_loss_grad(g, t, reduction), expected)


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_derivatives_match_autograd(reduction, weighted):
    self = torch.rand(3, 4, dtype=R) * 0.9 + 0.05
    target = torch.rand(3, 4, dtype=R)
    weight = torch.rand(3, 4, dtype=R) + 0.5 if weighted else None

    def fn(s, tg):
        return torch.ops.aten.binary_cross_entropy(s, tg, weight, reduction)

    y = fn(self, target)
    g = torch.randn_like(y)
    g_self, g_target = vjp(fn, [self, target], g)
    spread = F.expand_loss_grad(g, self, reduction)
    close(spread * F.bce_self_derivative(self, target, weight), g_self)
    close(spread * F.bce_target_derivative(self, weight), g_target)
    st, tt = torch.randn_like(self), torch.randn_like(target)
    tangent = F.apply_loss_reduction(
        F.bce_self_derivative(self, target, weight) * st
        + F.bce_target_derivative(self, weight) * tt,
        reduction,
    )
    close(tangent, jvp(fn, [self, target], [st, tt]))


def test_bce_derivatives_at_the_ends_match_autograd():
    self = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=R)
    target = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.25], dtype=R)

    def fn(s, tg):
        return torch.ops.aten.binary_cross_entropy(s, tg, None, 0)

    (g_self,) = vjp(lambda s: fn(s, target), [self], torch.ones(5, dtype=R))
    close(F.bce_self_derivative(self, target, None), g_self)
    # The loss is linear in target, with each log clamped at -100: the difference
    # between target 1 and target 0 is exact. (torch's own target backward gives +-inf at 0 and 1.)
    fd = fn(self, torch.ones_like(target)) - fn(self, torch.zeros_like(target))
    close(F.bce_target_derivative(self, None), fd)
    hand = torch.tensor([100.0, -100.0, 100.0, -100.0, 0.0], dtype=R)
    close(F.bce_target_derivative(self, None), hand)


@pytest.mark.parametrize("ndim", [2, 3, 4])
def test_channel_view_broadcasts_over_the_channel_dim(ndim):
    w = torch.arange(3.0)
    x = torch.ones([2, 3] + [2] * (ndim - 2))
    v = F.channel_view(w, ndim)
    assert v.shape == (3,) + (1,) * (ndim - 2)
    assert torch.equal((x * v).movedim(1, -1), x.movedim(1, -1) * w)


@pytest.mark.parametrize(
    "p, train", [(0.3, True), (0.3, None), (0.3, False), (1.0, True), (0.0, True)]
)
def test_dropout_scale_is_native_dropout_factor(p, train):
    x = torch.randn(200, dtype=R)
    out, mask = torch.ops.aten.native_dropout(x, p, train)
    scale = F.dropout_scale(p, train)
    close(out, x * mask * scale)
    g = torch.randn_like(x)
    (expected,) = vjp(lambda a: torch.ops.aten.native_dropout(a, p, train)[0], [x], g)
    # The mask of the autograd run is a fresh draw: compare where it is deterministic.
    if p in (0.0, 1.0) or train is False:
        close(torch.ops.aten.native_dropout_backward(g, mask, scale), expected)
    assert F.dropout_scale(0.5, True) == 2.0 and F.dropout_scale(0.5, False) == 1.0
    assert F.dropout_scale(1.0, None) == 0.0


@pytest.mark.parametrize("normalized_shape", [[4], [3, 4]])
@pytest.mark.parametrize("weighted", [False, True])
def test_layer_norm_tangent_matches_forward_ad(normalized_shape, weighted):
    x = torch.randn(2, 3, 4, dtype=R)
    weight = torch.randn(normalized_shape, dtype=R) if weighted else None
    bias = torch.randn(normalized_shape, dtype=R) if weighted else None

    def fn(a):
        return torch.ops.aten.native_layer_norm(
            a, normalized_shape, weight, bias, 1e-5
        )[0]

    t = torch.randn_like(x)
    xhat = torch.ops.aten.native_layer_norm(x, normalized_shape, None, None, 1e-5)[0]
    close(F.layer_norm_xhat(x, normalized_shape, 1e-5), xhat)
    got = _affine(F.layer_norm_tangent(t, x, normalized_shape, 1e-5), xhat, weight)
    close(got, jvp(fn, [x], [t]))


def _affine(normalized_t, xhat, weight, ndim=None):
    # The weight without a tangent: zeros of its dtype (the generated kernels' rule).
    zeros = None if weight is None else torch.zeros_like(weight)
    return F.norm_affine_tangent(normalized_t, xhat, weight, zeros, None, ndim)


BATCH_NORM_CASES = [
    ((3, 2, 4), True, False, True),
    ((4, 3), True, True, False),
    ((3, 2, 2, 2), False, True, True),
    ((5, 2, 3), False, True, False),
]


@pytest.mark.parametrize("shape, training, running, weighted", BATCH_NORM_CASES)
def test_batch_norm_tangent_and_xhat_match_forward_ad(
    shape, training, running, weighted
):
    x = torch.randn(shape, dtype=R)
    c = shape[1]
    weight = torch.randn(c, dtype=R) if weighted else None
    bias = torch.randn(c, dtype=R) if weighted else None
    rm = torch.randn(c, dtype=R) if running else None
    rv = torch.rand(c, dtype=R) + 0.5 if running else None
    eps = 1e-5

    def run(a, w=weight, b=bias):
        m = None if rm is None else rm.clone()  # training updates them in place
        v = None if rv is None else rv.clone()
        return torch.ops.aten.native_batch_norm(a, w, b, m, v, training, 0.1, eps)

    t = torch.randn_like(x)
    xhat = F.batch_norm_xhat(x, rm, rv, training, eps)
    close(xhat, run(x, None, None)[0])
    normalized_t = F.batch_norm_tangent(t, x, rm, rv, training, eps)
    got = _affine(normalized_t, xhat, weight, x.dim())
    close(got, jvp(lambda a: run(a)[0], [x], [t]))
    if weighted:
        wt, bt = torch.randn(c, dtype=R), torch.randn(c, dtype=R)
        expected = jvp(lambda w, b: run(x, w, b)[0], [weight, bias], [wt, bt])
        got = xhat * F.channel_view(wt, x.dim()) + F.channel_view(bt, x.dim())
        close(got, expected)


GROUP_NORM_CASES = [((2, 4, 3), 2, True), ((2, 6, 2, 2), 3, False), ((3, 4), 4, True)]


def _sizes(shape):
    """native_group_norm's N, C, HxW."""
    return shape[0], shape[1], math.prod(shape[2:])


def _group_norm(shape, group, weighted):
    """A random input (and weight and bias when `weighted`), and native_group_norm
    on them with eps 1e-5 (other weight and bias given to `run` replace them)."""
    x = torch.randn(shape, dtype=R)
    weight = torch.randn(shape[1], dtype=R) if weighted else None
    bias = torch.randn(shape[1], dtype=R) if weighted else None

    def run(a, w=weight, b=bias):
        return torch.ops.aten.native_group_norm(a, w, b, *_sizes(shape), group, 1e-5)

    return x, weight, bias, run


@pytest.mark.parametrize("shape, group, weighted", GROUP_NORM_CASES)
def test_group_norm_tangent_and_xhat_match_forward_ad(shape, group, weighted):
    x, weight, bias, run = _group_norm(shape, group, weighted)
    _, mean, rstd = run(x)
    t = torch.randn_like(x)
    xhat = F.group_norm_xhat(x, mean, rstd, group)
    close(xhat, run(x, None, None)[0])
    got = _affine(F.group_norm_tangent(t, x, mean, rstd, group), xhat, weight, x.dim())
    close(got, jvp(lambda a: run(a)[0], [x], [t]))
    if weighted:
        wt = torch.randn_like(weight)
        expected = jvp(lambda w: run(x, w, bias)[0], [weight], [wt])
        close(xhat * F.channel_view(wt, x.dim()), expected)


@pytest.mark.parametrize("shape, group, weighted", GROUP_NORM_CASES)
def test_group_norm_statistics_tangents_and_backward_match_autograd(
    shape, group, weighted
):
    x, weight, bias, run = _group_norm(shape, group, weighted)
    _, mean, rstd = run(x)
    t = torch.randn_like(x)
    close(F.group_norm_mean_tangent(t, group), jvp(lambda a: run(a)[1], [x], [t]))
    close(
        F.group_norm_rstd_tangent(t, x, mean, rstd, group),
        jvp(lambda a: run(a)[2], [x], [t]),
    )
    grads = [torch.randn_like(o) for o in run(x)]
    inputs = [v.clone().requires_grad_() for v in (x, weight, bias) if v is not None]
    expected = torch.autograd.grad(run(*inputs), inputs, grads)
    mask = [True, weighted, weighted]
    sizes = _sizes(shape)
    got = F.group_norm_backward(*grads, x, mean, rstd, weight, *sizes, group, mask)
    for g, e in zip([g for g in got if g is not None], expected, strict=True):
        close(g, e)


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


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(4, 5), (5,)])
def test_multi_margin_loss_derivative(p, weighted, shape):
    """multi_margin_loss_backward's values (a unit gradient, reduction none); and,
    being written in differentiable ops, its own derivative: central differences
    for p = 2 (0 for p = 1, whose hinges are linear)."""
    x = torch.randn(shape, dtype=R)
    target = torch.tensor([0, 4, 2, 1][: shape[0]] if len(shape) == 2 else [2])
    weight = torch.rand(5, dtype=R) + 0.5 if weighted else None
    ones = (
        torch.ones(target.shape, dtype=R)
        if len(shape) == 2
        else torch.ones((), dtype=R)
    )
    expected = torch.ops.aten.multi_margin_loss_backward(
        ones, x, target, p, 0.7, weight, 0
    )
    derivative = F.multi_margin_loss_derivative(x, target, p, 0.7, weight)
    close(derivative, expected)
    leaf = x.clone().requires_grad_()
    r, d = torch.randn_like(x), torch.randn_like(x)
    (grad,) = torch.autograd.grad(
        (F.multi_margin_loss_derivative(leaf, target, p, 0.7, weight) * r).sum(), leaf
    )
    eps = 1e-6
    plus = F.multi_margin_loss_derivative(x + eps * d, target, p, 0.7, weight)
    minus = F.multi_margin_loss_derivative(x - eps * d, target, p, 0.7, weight)
    close((grad * d).sum(), ((plus - minus) * r).sum() / (2 * eps))
    if p == 1:
        assert grad.abs().max() == 0
