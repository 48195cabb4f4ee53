"""The helpers of dualgen.formulas.reductions (reductions, scans, sorts), each against
torch's own autograd (torch.autograd.grad, torch.func.jvp) of the op it serves, or a
small hand-computed case; float64, and complex128 where the op supports it."""

from __future__ import annotations

import math

import pytest
import torch
from formula_checks import DTYPES, R, close, jvp, vjp

from dualgen import formulas as F

INF = math.inf


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize(
    "dim, keepdim",
    [([1], False), ([0, 2], True), (None, False), ([], False), (-1, False)],
)
def test_expand_reduced_and_reduced_numel_invert_mean(dim, keepdim):
    x = torch.randn(2, 3, 4, requires_grad=True)
    y = x.mean(dim=dim, keepdim=keepdim) if dim not in (None, []) else x.mean()
    g = torch.randn_like(y)
    (expected,) = torch.autograd.grad(y, x, g)
    got = F.expand_reduced(g, x, dim, keepdim) / F.reduced_numel(x, dim)
    torch.testing.assert_close(got, expected)


def test_amax_grad_and_tangent_share_among_ties():
    x = torch.tensor(
        [[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]], dtype=torch.float64, requires_grad=True
    )
    y = x.amax(dim=1)
    g = torch.tensor([1.0, 2.0], dtype=torch.float64)
    (expected,) = torch.autograd.grad(y, x, g)
    torch.testing.assert_close(
        F.amax_grad(g, x.detach(), y.detach(), [1], False), expected
    )
    t = torch.randn_like(x)
    _, jvp = torch.func.jvp(lambda a: a.amax(dim=1), (x.detach(),), (t,))
    torch.testing.assert_close(
        F.amax_tangent(t, x.detach(), y.detach(), [1], False), jvp
    )


@pytest.mark.parametrize("keepdim", [False, True])
def test_gather_reduced_picks_the_selected_elements(keepdim):
    x = torch.randn(3, 4)
    values, indices = x.max(dim=1, keepdim=keepdim)
    assert torch.equal(F.gather_reduced(x, 1, indices, keepdim), values)


# ---------------------------------------------------------------- norms, dist


NORM_CASES = [(None, False), (1, True), ([0, 2], False), (-1, False)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", [None, 0, 1, 1.5, 2, 3, INF, -INF])
@pytest.mark.parametrize("dim, keepdim", NORM_CASES)
def test_vector_norm_grad_and_tangent_match_autograd(ord, dim, keepdim, dtype):
    x = torch.randn(2, 3, 4, dtype=dtype)
    o = 2 if ord is None else ord

    def fn(a):
        return torch.linalg.vector_norm(a, o, dim, keepdim)

    y = fn(x)
    g = torch.randn_like(y)
    (expected,) = vjp(fn, [x], g)
    close(F.vector_norm_grad(g, x, ord, dim, keepdim, y), expected)
    t = torch.randn_like(x)
    close(F.vector_norm_tangent(t, x, ord, dim, keepdim, y), jvp(fn, [x], [t]))


@pytest.mark.parametrize("ord", [1, 1.5, 2, 3, INF])
def test_vector_norm_derivatives_are_zero_at_a_zero_norm(ord):
    x = torch.randn(3, 4, dtype=R)
    x[1] = 0
    y = torch.linalg.vector_norm(x, ord, 1)
    g = torch.ones_like(y)
    grad = F.vector_norm_grad(g, x, ord, 1, False, y)
    assert torch.equal(grad[1], torch.zeros(4, dtype=R))
    tangent = F.vector_norm_tangent(torch.randn_like(x), x, ord, 1, False, y)
    assert tangent[1] == 0 and tangent.isfinite().all()


@pytest.mark.parametrize("ord", [INF, -INF])
def test_vector_norm_inf_derivatives_share_among_ties(ord):
    x = torch.tensor([[3.0, -3.0, 1.0, 3.0], [0.5, 2.0, -0.5, 0.5]], dtype=R)

    def fn(a):
        return torch.linalg.vector_norm(a, ord, 1)

    y = fn(x)
    g = torch.tensor([1.0, 2.0], dtype=R)
    (expected,) = vjp(fn, [x], g)
    close(F.vector_norm_grad(g, x, ord, 1, False, y), expected)
    # Hand-computed, row 0: |x| = 3 at three places (signs +, -, +), min |x| = 1 once.
    if ord > 0:
        hand_row0 = torch.tensor([1.0, -1.0, 0.0, 1.0], dtype=R) / 3
    else:
        hand_row0 = torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=R)
    close(F.vector_norm_grad(g, x, ord, 1, False, y)[0], hand_row0)
    t = torch.randn_like(x)
    close(F.vector_norm_tangent(t, x, ord, 1, False, y), jvp(fn, [x], [t]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0, 1, 2, 3, INF])
def test_dist_grad_and_tangent_match_autograd_with_broadcasting(p, dtype):
    a, b = torch.randn(3, 4, dtype=dtype), torch.randn(4, dtype=dtype)

    def fn(u, v):
        return torch.dist(u, v, p)

    y = fn(a, b)
    g = torch.randn_like(y)
    if p == 0:  # torch's own dist backward fails for p=0; it is piecewise constant
        ga, gb = torch.zeros_like(a), torch.zeros_like(b)
    else:
        ga, gb = vjp(fn, [a, b], g)
    close(F.dist_grad(g, a, b, p, y, a), ga)
    close(-F.dist_grad(g, a, b, p, y, b), gb)
    ta, tb = torch.randn_like(a), torch.randn_like(b)
    got = F.dist_tangent(ta, a, b, p, y) - F.dist_tangent(tb, a, b, p, y)
    close(got, jvp(fn, [a, b], [ta, tb]))


# ---------------------------------------------------------------- var, std, mean


VAR_CASES = [
    (None, None, False),
    (1, 0, False),
    ([0, 2], 1, True),
    (-1, 2, False),
    ([], None, True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim, correction, keepdim", VAR_CASES)
def test_var_std_and_mean_derivatives_match_autograd(dim, correction, keepdim, dtype):
    x = torch.randn(2, 3, 4, dtype=dtype)
    # dim=[] reduces all; torch's var/std backward (not forward) takes it as no dims
    # and returns inf, so the autograd reference reduces all with dim=None.
    ref_dim = None if dim == [] else dim
    kw = {"dim": ref_dim, "correction": correction, "keepdim": keepdim}

    def var(a):
        return torch.var(a, **kw)

    def std(a):
        return torch.std(a, **kw)

    def mean(a):
        return a.mean(dim=dim, keepdim=keepdim) if dim is not None else a.mean()

    t = torch.randn_like(x)
    for fn, grad_fn, tangent_fn in [
        (var, F.var_grad, F.var_tangent),
        (std, F.std_grad, F.std_tangent),
    ]:
        y = fn(x)
        g = torch.randn_like(y)
        (expected,) = vjp(fn, [x], g)
        extra = (y,) if grad_fn is F.std_grad else ()
        close(grad_fn(g, x, dim, correction, keepdim, *extra), expected)
        got = tangent_fn(t, x, dim, correction, keepdim, y)
        close(got, jvp(fn, [x], [t]))
    close(F.mean_tangent(t, x, dim, keepdim), jvp(mean, [x], [t]))


def test_var_grad_hand_computed():
    x = torch.tensor([1.0, 2.0, 6.0], dtype=R)  # mean 3, var (4 + 1 + 9) / 2 = 7
    assert torch.var(x) == 7
    close(F.var_grad(torch.tensor(1.0, dtype=R), x, None, None, False), x - 3)
    t = torch.tensor([1.0, 0.0, 0.0], dtype=R)
    close(
        F.var_tangent(t, x, None, None, False, torch.var(x)),
        torch.tensor(-2.0, dtype=R),
    )


def test_std_derivatives_are_zero_where_std_is_zero():
    x = torch.ones(2, 3, dtype=R)
    x[1] = torch.tensor([1.0, 2.0, 4.0])
    y = torch.std(x, dim=1)
    g = torch.ones_like(y)
    (expected,) = vjp(lambda a: torch.std(a, dim=1), [x], g)
    got = F.std_grad(g, x, 1, None, False, y)
    close(got, expected)
    assert torch.equal(got[0], torch.zeros(3, dtype=R))
    tangent = F.std_tangent(torch.randn_like(x), x, 1, None, False, y)
    assert tangent[0] == 0


# ---------------------------------------------------------------- logsumexp, scans


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim, keepdim", [(1, False), ([0, 2], True), (-1, True)])
def test_logsumexp_weights_and_tangent_match_autograd(dim, keepdim, dtype):
    x = torch.randn(2, 3, 4, dtype=dtype)

    def fn(a):
        return torch.logsumexp(a, dim, keepdim)

    y = fn(x)
    g = torch.randn_like(y)
    (expected,) = vjp(fn, [x], g)
    w = F.logsumexp_weights(x, dim, keepdim, y)
    close(F.expand_reduced(g, x, dim, keepdim) * w.conj(), expected)
    t = torch.randn_like(x)
    close(F.logsumexp_tangent(t, x, dim, keepdim, y), jvp(fn, [x], [t]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dim", [((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -2)])
def test_reverse_cumsum_is_cumsum_backward(shape, dim, dtype):
    x = torch.randn(shape, dtype=dtype)
    g = torch.randn(shape, dtype=dtype)
    (expected,) = vjp(lambda a: a.cumsum(dim), [x], g)
    close(F.reverse_cumsum(g, dim), expected)


def test_reverse_cumsum_hand_computed_and_0d():
    g = torch.tensor([1.0, 2.0, 3.0])
    close(F.reverse_cumsum(g, 0), torch.tensor([6.0, 5.0, 3.0]))
    s = torch.tensor(2.0)
    close(F.reverse_cumsum(s, 0), s)


def _with_zeros(x):
    x = x.clone()
    x[0, 1] = 0  # one zero in the row
    x[1, 0] = x[1, 2] = 0  # two zeros in the row
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["cumprod", "logcumsumexp"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scan_grad_and_tangent_match_autograd(kind, dim, dtype):
    x = torch.randn(3, 4, dtype=dtype)
    if kind == "cumprod":
        x = _with_zeros(x)

    def fn(a):
        return a.cumprod(dim) if kind == "cumprod" else a.logcumsumexp(dim)

    g = torch.randn_like(x)
    (expected,) = vjp(fn, [x], g)
    close(F.scan_grad(g, x, dim, kind), expected)
    t = torch.randn_like(x)
    close(F.scan_tangent(t, x, dim, kind), jvp(fn, [x], [t]))


@pytest.mark.parametrize("kind", ["cumprod", "logcumsumexp"])
def test_scan_derivatives_of_a_0d_input_are_the_identity(kind):
    x, g = torch.tensor(0.7, dtype=R), torch.tensor(1.5, dtype=R)
    close(F.scan_grad(g, x, 0, kind), g)
    close(F.scan_tangent(g, x, 0, kind), g)


def test_logcumsumexp_derivatives_with_minus_inf_match_a_very_negative_input():
    # The limit x_k -> -inf: torch's own backward gives NaN at a leading -inf, so the
    # reference is autograd at -60 in place of -inf (exp(-60) is below tolerance).
    x = torch.tensor([-INF, 0.5, -INF, 1.0], dtype=R)
    near = torch.where(x.isinf(), -60.0, x)
    g = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=R)
    (expected,) = vjp(lambda a: a.logcumsumexp(0), [near], g)
    got = F.scan_grad(g, x, 0, "logcumsumexp")
    # Entry 0 (result_0 = x_0 = -inf) is a convention: the helper gives 0, torch NaN,
    # and the limit from a finite x_0 is g_0 (result_0 = x_0 there); not compared.
    close(got[1:], expected[1:])
    assert got[0] == 0 and got[2] == 0
    t = torch.randn_like(x)
    expected_t = jvp(lambda a: a.logcumsumexp(0), [near], [t])
    close(F.scan_tangent(t, x, 0, "logcumsumexp")[1:], expected_t[1:])


# ---------------------------------------------------------------- prod


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dim, keepdim", [(None, False), (0, False), (1, True), (-1, False)]
)
def test_prod_grad_and_tangent_match_autograd_with_zeros(dim, keepdim, dtype):
    for x in [
        torch.randn(3, 4, dtype=dtype),
        _with_zeros(torch.randn(3, 4, dtype=dtype)),
    ]:

        def fn(a):
            return a.prod() if dim is None else a.prod(dim, keepdim)

        y = fn(x)
        g = torch.randn_like(y)
        (expected,) = vjp(fn, [x], g)
        close(F.prod_grad(g, x, dim, keepdim), expected)
        t = torch.randn_like(x)
        close(F.prod_tangent(t, x, dim, keepdim, y), jvp(fn, [x], [t]))


def test_prod_grad_hand_computed_with_one_and_two_zeros():
    one = torch.tensor([2.0, 0.0, 3.0])
    close(
        F.prod_grad(torch.tensor(1.0), one, None, False), torch.tensor([0.0, 6.0, 0.0])
    )
    two = torch.tensor([0.0, 0.0, 3.0])
    close(F.prod_grad(torch.tensor(1.0), two, None, False), torch.zeros(3))
    close(
        F.prod_tangent(torch.ones(3), one, None, False, one.prod()), torch.tensor(6.0)
    )


def test_prod_of_an_integer_input_promotes_in_the_tangent():
    x = torch.tensor([2, 3, 4])
    y = x.prod().to(R)
    close(
        F.prod_tangent(torch.ones(3, dtype=R), x, None, False, y),
        torch.tensor(26.0, dtype=R),
    )


# ---------------------------------------------------------------- full max/min/median


FULL_REDUCTIONS = [torch.max, torch.min, torch.median, torch.nanmedian]


@pytest.mark.parametrize("op", FULL_REDUCTIONS, ids=lambda f: f.__name__)
def test_evenly_distribute_grad_and_read_tangent_match_autograd_with_ties(op):
    x = torch.tensor([[1.0, 3.0, 2.0], [3.0, 1.0, 2.0], [2.0, 3.0, 1.0]], dtype=R)
    y = op(x)
    g = torch.tensor(1.5, dtype=R)
    (expected,) = vjp(op, [x], g)
    close(F.evenly_distribute_grad(g, x, y), expected)
    assert (F.evenly_distribute_grad(g, x, y) != 0).sum() == 3  # three ties
    t = torch.randn_like(x)
    close(F.evenly_read_tangent(t, x, y), jvp(op, [x], [t]))


@pytest.mark.parametrize("op", [torch.max, torch.min], ids=lambda f: f.__name__)
def test_evenly_distribute_grad_sends_nan_results_to_the_nans(op):
    x = torch.tensor([1.0, math.nan, 3.0, math.nan], dtype=R)
    y = op(x)
    g = torch.tensor(1.0, dtype=R)
    (expected,) = vjp(op, [x], g)
    close(F.evenly_distribute_grad(g, x, y), expected)
    close(
        F.evenly_distribute_grad(g, x, y), torch.tensor([0.0, 0.5, 0.0, 0.5], dtype=R)
    )
    t = torch.tensor([10.0, 2.0, 30.0, 4.0], dtype=R)
    close(F.evenly_read_tangent(t, x, y), torch.tensor(3.0, dtype=R))


# ---------------------------------------------------------------- trace, renorm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (4, 2)])
def test_trace_grad_matches_autograd(shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    g = torch.randn((), dtype=dtype)
    (expected,) = vjp(torch.trace, [x], g)
    close(F.trace_grad(g, x), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "p, dim, maxnorm", [(2, 0, 1.5), (1, 1, 1.5), (3, -1, 1.0), (2, 1, 100.0)]
)
def test_renorm_grad_and_tangent_match_autograd(p, dim, maxnorm, dtype):
    x = torch.randn(3, 4, dtype=dtype)
    x[0] *= 0.1  # one slice under maxnorm, so both branches are exercised

    def fn(a):
        return torch.renorm(a, p, dim, maxnorm)

    g = torch.randn_like(x)
    (expected,) = vjp(fn, [x], g)
    close(F.renorm_grad(g, x, p, dim, maxnorm), expected)
    t = torch.randn_like(x)
    close(F.renorm_tangent(t, x, p, dim, maxnorm), jvp(fn, [x], [t]))


# ---------------------------------------------------------------- sort-like ops


SELECTING_OPS = {
    "sort": lambda a, d: torch.sort(a, d),
    "sort_descending": lambda a, d: torch.sort(a, d, descending=True),
    "topk": lambda a, d: torch.topk(a, 2, d),
    "cummax": lambda a, d: torch.cummax(a, d),
    "cummin": lambda a, d: torch.cummin(a, d),
}


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(SELECTING_OPS))
def test_scatter_and_gather_selected_match_autograd(name, dim):
    op = SELECTING_OPS[name]
    x = torch.randn(4, 5, dtype=R)
    values, indices = op(x, dim)
    g = torch.randn_like(values)
    (expected,) = vjp(lambda a: op(a, dim)[0], [x], g)
    close(F.scatter_selected(g, x, dim, indices), expected)
    t = torch.randn_like(x)
    close(F.gather_selected(t, dim, indices), jvp(lambda a: op(a, dim)[0], [x], [t]))


def test_scatter_and_gather_selected_of_a_0d_input():
    x, g = torch.tensor(1.0), torch.tensor(2.0)
    _, indices = torch.sort(x)
    close(F.scatter_selected(g, x, 0, indices), g)
    close(F.gather_selected(g, 0, indices), g)


@pytest.mark.parametrize("ord", [2, 1, 3, INF, 0])
@pytest.mark.parametrize("dtype", DTYPES)
def test_foreach_norm_tangents_and_grads_match_autograd(ord, dtype):
    # Per tensor against linalg.vector_norm (native forward AD of _foreach_norm
    # itself gives tangents of the wrong shape).
    xs = [torch.randn(s, dtype=dtype) for s in [(2, 3), (4,), ()]]
    xs[0][1] = 0
    ys = torch._foreach_norm(xs, ord)
    ts = [torch.randn_like(x) for x in xs]
    gs = [torch.randn_like(y) for y in ys]
    gs[1] = None  # a norm without a gradient
    tangents = F.foreach_norm_tangents(ts, xs, ord, ys)
    grads = F.foreach_norm_grads(gs, xs, ord, ys)
    for x, y, t, g, tangent, grad in zip(xs, ys, ts, gs, tangents, grads):

        def fn(a):
            return torch.linalg.vector_norm(a, ord)

        close(y, fn(x))
        close(tangent, jvp(fn, [x], [t]))
        (want,) = vjp(fn, [x], g if g is not None else torch.zeros_like(y))
        close(grad, want)
