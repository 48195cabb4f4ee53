"""The helpers of dualgen.formulas.backward_ops: the formulas of the backward ops
(`*_backward`) of activations, losses, convolution, the norms and embedding, which
make forward-over-reverse (Hessian-vector products) work. Each against torch's own
double backward (autograd twice, or torch.func.jvp) of the op it serves, finite
differences where torch has no derivative (native_group_norm_backward), and adjoint
identities between each tangent and gradient helper. float64 only: torch runs none
of these ops in complex128."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


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
    t = torch.ones_like(x)
    close(F.mish_derivative(x), jvp(torch.nn.functional.mish, [x], [t]))


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


def inner(a, b) -> float:
    """sum <a_i, b_i> over the pairs where both are present."""
    return sum(
        float((x * y).sum()) for x, y in zip(a, b) if x is not None and y is not None
    )


def randn_like_all(tensors):
    return [None if t is None else torch.randn_like(t) for t in tensors]


# ---------------------------------------------------------------- convolution


CONV_CASES = [
    # input shape, weight shape, (stride, padding, dilation, transposed,
    # output_padding, groups)
    ((2, 4, 5), (6, 2, 3), ([1], [1], [1], False, [0], 2)),
    ((1, 2, 4, 5), (3, 2, 2, 3), ([2, 1], [0, 1], [1, 2], False, [0, 0], 1)),
    ((2, 4, 3, 3), (4, 3, 2, 2), ([2, 2], [1, 0], [1, 1], True, [1, 0], 2)),
]


def _conv_case(xs, ws, args):
    x, w = torch.randn(xs, dtype=R), torch.randn(ws, dtype=R)
    g = torch.randn_like(torch.ops.aten.convolution(x, w, None, *args))

    def op(g, x, w):
        bias = [g.shape[1]]
        return torch.ops.aten.convolution_backward(
            g, x, w, bias, *args, [True, True, True]
        )

    return g, x, w, op


@pytest.mark.parametrize("xs, ws, args", CONV_CASES)
def test_convolution_backward_grads_match_autograd(xs, ws, args):
    g, x, w, op = _conv_case(xs, ws, args)
    out = op(g, x, w)
    cotangents = randn_like_all(out)
    leaves = [t.clone().requires_grad_() for t in (g, x, w)]
    expected = torch.autograd.grad(op(*leaves), leaves, cotangents)
    got = F.convolution_backward_grads(*cotangents, g, x, w, args)
    for a, b in zip(got, expected):
        close(a, b)
    # absent output gradients: only the weight's reaches grad_output and input
    go, gi, gw = F.convolution_backward_grads(None, cotangents[1], None, g, x, w, args)
    assert gw is None
    tangents = randn_like_all([g, x, w])
    _, pushed = torch.func.jvp(op, (g, x, w), tuple(tangents))
    close(inner([None, cotangents[1]], pushed[:2]), inner([go, gi], tangents[:2]))


# ---------------------------------------------------------------- norms


def _layer(x, w):
    _, mean, rstd = torch.native_layer_norm(x, [4, 5], w, None, 1e-5)
    return mean, rstd


def _batch(x, w, train, rm, rv):
    if not train:
        return rm, rv
    _, mean, invstd = torch.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    return mean, invstd


NORM_CASES = ["layer", "batch-train", "batch-eval"]


def _norm_case(case, weighted=True):
    """(op of (g, x, w) with the statistics of x computed inside, its helpers'
    arguments for given primals)."""
    if case == "layer":
        x = torch.randn(3, 4, 5, dtype=R)
        w = torch.randn(4, 5, dtype=R) if weighted else None

        def stats(x, w):
            return (*_layer(x, w), [4, 5], True, 0.0)

        def op(g, x, w):
            mean, rstd = _layer(x, w)
            mask = [True, w is not None, w is not None]
            return torch.ops.aten.native_layer_norm_backward(
                g, x, [4, 5], mean, rstd, w, w, mask
            )

        return "layer", x, w, op, stats
    train = case == "batch-train"
    x = torch.randn(3, 4, 5, dtype=R)
    w = torch.randn(4, dtype=R) if weighted else None
    rm, rv = torch.randn(4, dtype=R), torch.rand(4, dtype=R) + 0.5

    def stats(x, w):
        return (*_batch(x, w, train, rm, rv), None, train, 1e-5)

    def op(g, x, w):
        mean, invstd = _batch(x, w, train, rm, rv)
        save = (mean, invstd) if train else (None, None)
        return torch.ops.aten.native_batch_norm_backward(
            g, x, w, rm, rv, *save, train, 1e-5, [True, True, True]
        )

    return "batch", x, w, op, stats


def _norm_tangents(kind, out, tangents, g, x, w, stats):
    """norm_backward_tangent of each output `out` of a norm's backward;
    `tangents` of (g, x, w, mean, rstd), the statistics' None when they move
    with x; `stats` (mean, rstd, extra, train, eps)."""
    mean, rstd, *rest = stats
    primals = [g, x, w, mean, rstd]
    return [
        F.norm_backward_tangent(k, out[k], kind, tangents, primals, *rest)
        for k in range(3)
    ]


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("case", NORM_CASES)
def test_norm_backward_tangent_matches_jvp(case, weighted):
    kind, x, w, op, stats = _norm_case(case, weighted)
    g = torch.randn_like(x)
    primals = (g, x) if w is None else (g, x, w)
    tangents = randn_like_all(primals)

    def fn(*p):
        return op(*p) if w is not None else op(*p, None)

    out, expected = torch.func.jvp(fn, primals, tuple(tangents))
    tangents = tangents + [None] * (5 - len(tangents))  # w's, the statistics'
    got = _norm_tangents(kind, out, tangents, g, x, w, stats(x, w))
    # without a weight only grad_input is asked for
    for a, b in zip(got if w is not None else got[:1], expected):
        close(a, b)


@pytest.mark.parametrize("case", NORM_CASES)
def test_norm_backward_grads_match_autograd(case):
    kind, x, w, op, stats = _norm_case(case)
    g = torch.randn_like(x)
    out = op(g, x, w)
    cotangents = randn_like_all(out)
    leaves = [t.clone().requires_grad_() for t in (g, x, w)]
    expected = torch.autograd.grad(op(*leaves), leaves, cotangents)
    mean, rstd, extra, train, eps = stats(x, w)
    primals = [g, x, w, mean, rstd]
    got = F.norm_backward_grads(*cotangents, kind, primals, extra, train, eps)
    for a, b in zip(got[:3], expected):
        close(a, b)
    assert got[3] is None and got[4] is None


def _group(x, w, group):
    n, c = x.shape[:2]
    return torch.native_group_norm(x, w, None, n, c, x.shape[2:].numel(), group, 1e-5)


def _group_op(g, x, w, mean, rstd, group):
    n, c = x.shape[:2]
    hxw = x.shape[2:].numel()
    mask = [True, True, True]
    return torch.ops.aten.native_group_norm_backward(
        g, x, mean, rstd, w, n, c, hxw, group, mask
    )


def _central_difference(fn, primals, tangents, eps=1e-6):
    plus = fn(*[p + eps * t for p, t in zip(primals, tangents)])
    minus = fn(*[p - eps * t for p, t in zip(primals, tangents)])
    return [(a - b) / (2 * eps) for a, b in zip(plus, minus)]


def test_norm_backward_group_matches_finite_differences():
    group = 3
    x = torch.randn(2, 6, 5, dtype=R)
    g, w = torch.randn_like(x), torch.randn(6, dtype=R)
    _, mean, rstd = _group(x, w, group)
    out = _group_op(g, x, w, mean, rstd, group)
    # statistics moving with the input: the total derivative
    tangents = randn_like_all([g, x, w])

    def total(g, x, w):
        return _group_op(g, x, w, *_group(x, w, group)[1:], group)

    expected = _central_difference(total, (g, x, w), tangents)
    primals = [g, x, w, mean, rstd]
    for k in range(3):
        got = F.norm_backward_tangent(
            k, out[k], "group", tangents + [None, None], primals, group
        )
        close(got, expected[k], atol=1e-6, rtol=1e-6)
    # statistics as inputs of their own (any values): the partial derivatives
    mean, rstd = torch.randn_like(mean), torch.rand_like(rstd) + 0.5
    out = _group_op(g, x, w, mean, rstd, group)
    tangents = randn_like_all([g, x, w, mean, rstd])

    def partial(g, x, w, mean, rstd):
        return _group_op(g, x, w, mean, rstd, group)

    expected = _central_difference(partial, (g, x, w, mean, rstd), tangents)
    primals = [g, x, w, mean, rstd]
    for k in range(3):
        got = F.norm_backward_tangent(k, out[k], "group", tangents, primals, group)
        close(got, expected[k], atol=1e-6, rtol=1e-6)


ADJOINT_CASES = [(c, False) for c in NORM_CASES + ["group"]] + [("group", True)]


@pytest.mark.parametrize("case, stats_are_inputs", ADJOINT_CASES)
def test_norm_backward_grads_are_adjoint_to_tangents(case, stats_are_inputs):
    if case == "group":
        kind, group = "group", 2
        x = torch.randn(2, 4, 3, dtype=R)
        w = torch.randn(4, dtype=R)
        _, mean, rstd = _group(x, w, group)
        if stats_are_inputs:
            mean, rstd = torch.randn_like(mean), torch.rand_like(rstd) + 0.5
        extra, train, eps = group, True, 0.0
        out = _group_op(torch.randn_like(x), x, w, mean, rstd, group)
    else:
        kind, x, w, op, stats = _norm_case(case)
        mean, rstd, extra, train, eps = stats(x, w)
        out = op(torch.randn_like(x), x, w)
    g = torch.randn_like(x)
    cotangents = randn_like_all(out)
    tangents = randn_like_all([g, x, w, mean, rstd])
    if not stats_are_inputs:
        tangents[3] = tangents[4] = None
    forward = _norm_tangents(
        kind, out, tangents, g, x, w, (mean, rstd, extra, train, eps)
    )
    primals = [g, x, w, mean, rstd]
    grads = F.norm_backward_grads(
        *cotangents, kind, primals, extra, train, eps, stats_are_inputs
    )
    close(inner(cotangents, forward), inner(grads, tangents))


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("padding_idx, scale", [(-1, False), (2, True), (1, False)])
def test_embedding_dense_backward_grad_matches_autograd(padding_idx, scale):
    indices = torch.tensor([[0, 2, 2, 4], [1, 0, 3, 3], [4, 4, 1, 0]])
    go = torch.randn(3, 4, 6, dtype=R, requires_grad=True)
    out = torch.ops.aten.embedding_dense_backward(go, indices, 5, padding_idx, scale)
    cotangent = torch.randn_like(out)
    got = F.embedding_dense_backward_grad(cotangent, indices, padding_idx, scale)
    # the adjoint identity <cotangent, op(go)> = <grad, go>
    close(float((cotangent * out.detach()).sum()), float((got * go.detach()).sum()))
    if not scale:
        # (native's gradient ignores scale_grad_by_freq, so only compare without it)
        (expected,) = torch.autograd.grad(out, go, cotangent)
        close(got, expected)


@pytest.mark.parametrize("present", [[0, 1], [0], [1]], ids=["both", "self", "weight"])
def test_transposed_convolution_backward_grads(present):
    """The gradients of a transposed convolution's backward (grad_output's
    gradients in self and weight) against autograd through convolution_backward."""
    x, w = torch.randn(2, 4, 3, 3, dtype=R), torch.randn(4, 3, 2, 2, dtype=R)
    args = (
        [1, 0],
        [1, 0],
        [2, 2],
        [1, 1],
        2,
    )  # padding, output_padding, stride, dilation, groups
    padding, output_padding, stride, dilation, groups = args
    y = torch.ops.aten.convolution(
        x, w, None, stride, padding, dilation, True, output_padding, groups
    )
    g = torch.randn_like(y)

    def backward(x, g, w):
        return torch.ops.aten.convolution_backward(
            g,
            x,
            w,
            None,
            stride,
            padding,
            dilation,
            True,
            output_padding,
            groups,
            [True, True, False],
        )[:2]

    cotangents = [torch.randn_like(x), torch.randn_like(w)]
    given = [c if k in present else None for k, c in enumerate(cotangents)]
    expected = vjp(
        backward,
        [x, g, w],
        [c if k in present else torch.zeros_like(c) for k, c in enumerate(cotangents)],
    )
    close(
        list(F.transposed_convolution_backward_grads(*given, x, g, w, *args)),
        list(expected),
    )
