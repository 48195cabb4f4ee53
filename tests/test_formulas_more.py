"""The helpers of dualgen.formulas that test_formulas.py does not cover, each against
torch's own autograd (torch.autograd.grad, torch.func.jvp) of the op it serves, or a
small hand-computed case; float64, and complex128 where the op supports it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from dualgen import formulas as F

R, C = torch.float64, torch.complex128
DTYPES = [R, C]
INF = math.inf


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


# ---------------------------------------------------------------- coverage


def test_every_public_helper_is_referenced_by_a_test():
    here = Path(__file__).parent
    text = "".join(p.read_text() for p in sorted(here.glob("test_formulas*.py")))
    missing = [n for n in F.__all__ if not re.search(rf"\bF\.{n}\b", text)]
    assert not missing, f"helpers without a test: {missing}"


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


# ---------------------------------------------------------------- views, shape ops


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_grads_is_split_backward_with_zeros_for_missing_grads(dtype):
    x = torch.randn(3, 6, dtype=dtype)
    outs = x.split([2, 1, 3], dim=1)
    g0, g2 = torch.randn_like(outs[0]), torch.randn_like(outs[2])
    xr = x.clone().requires_grad_()
    parts = xr.split([2, 1, 3], dim=1)
    (expected,) = torch.autograd.grad([parts[0], parts[2]], [xr], [g0, g2])
    close(F.cat_grads([g0, None, g2], outs, 1), expected)


@pytest.mark.parametrize("op", ["scatter", "scatter_add"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_grad_is_scatter_src_backward_for_a_smaller_index(op, dtype):
    self = torch.randn(4, 5, dtype=dtype)
    src = torch.randn(3, 6, dtype=dtype)
    index = torch.tensor([[0, 2, 4], [1, 3, 0]])  # rows distinct: scatter is exact

    def fn(s):  # torch's scatter backward fails for a src larger than index:
        return getattr(torch, op)(self, 1, index, s[:2, :3])  # slice it explicitly

    g = torch.randn_like(self)
    (expected,) = vjp(fn, [src], g)
    got = F.gather_grad(g, 1, index, src)
    close(got, expected)
    assert got.shape == src.shape and torch.equal(got[2], torch.zeros(6, dtype=dtype))


def test_gather_grad_of_0d_tensors():
    self, src, index = torch.tensor(1.0), torch.tensor(2.0), torch.tensor(0)
    g = torch.tensor(3.0)
    (expected,) = vjp(lambda s: torch.scatter(self, 0, index, s), [src], g)
    close(F.gather_grad(g, 0, index, src), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dim, start, length", [(0, 1, 2), (1, 0, 5), (1, -3, 2), (-1, 4, 1)]
)
def test_narrow_grad_matches_autograd(dim, start, length, dtype):
    x = torch.randn(4, 5, dtype=dtype)
    y = x.narrow(dim, start, length)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: a.narrow(dim, start, length), [x], g)
    close(F.narrow_grad(g, x, dim, start, length), expected)


@pytest.mark.parametrize("pad", [[1, 2], [0, 1, 2, 0], [-1, 2, 1, -1]])
def test_negated_pad_is_constant_pad_nd_backward(pad):
    x = torch.randn(3, 4, dtype=R)
    y = torch.constant_pad_nd(x, pad, 0.5)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: torch.constant_pad_nd(a, pad, 0.5), [x], g)
    close(torch.constant_pad_nd(g, F.negated(pad)), expected)


@pytest.mark.parametrize("shifts, dims", [([2], [1]), ([1, -3], [0, 1]), ([5], [])])
def test_negated_shifts_is_roll_backward(shifts, dims):
    x = torch.randn(3, 4, dtype=C)
    g = torch.randn_like(x)
    (expected,) = vjp(lambda a: a.roll(shifts, dims), [x], g)
    close(g.roll(F.negated(shifts), dims), expected)
    assert F.negated([1, -2, 0]) == [-1, 2, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, repeats",
    [((2, 3), (2, 1)), ((2, 3), (2, 3, 2)), ((3,), (1, 2, 2)), ((), (3,)), ((), ())],
)
def test_repeat_grad_matches_autograd(shape, repeats, dtype):
    x = torch.randn(shape, dtype=dtype)
    y = x.repeat(repeats)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: a.repeat(repeats), [x], g)
    close(F.repeat_grad(g, x, repeats), expected)


def test_stack_grads_is_unbind_backward_with_zeros_for_missing_grads():
    x = torch.randn(3, 4, dtype=C)
    outs = x.unbind(1)
    xr = x.clone().requires_grad_()
    parts = xr.unbind(1)
    g1, g3 = torch.randn(3, dtype=C), torch.randn(3, dtype=C)
    (expected,) = torch.autograd.grad([parts[1], parts[3]], [xr], [g1, g3])
    close(F.stack_grads([None, g1, None, g3], x, outs, 1), expected)
    empty = torch.randn(0, 3)
    assert torch.equal(
        F.stack_grads([], empty, empty.unbind(0), 0), empty.new_zeros(0, 3)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "size, stride, offset",
    [((2, 3), (5, 2), 1), ((4,), (6,), None), ((3, 2), (1, 7), 3)],
)
def test_as_strided_grad_matches_autograd_on_a_view_with_an_offset(
    size, stride, offset, dtype
):
    base = torch.randn(40, dtype=dtype)
    x = base[2:22].view(4, 5)  # a view with a storage offset, in a larger storage

    def fn(a):
        return a.as_strided(size, stride, offset)

    g = torch.randn(size, dtype=dtype)
    b = base.clone().requires_grad_()
    xv = b[2:22].view(4, 5)
    (expected,) = torch.autograd.grad(fn(xv), xv, g)
    got = F.as_strided_grad(g, x, size, stride, offset)
    close(got, expected)
    assert got.shape == x.shape


SCATTER_REDUCE = [
    (reduce, include_self)
    for reduce in ["sum", "mean", "amax", "amin"]
    for include_self in [True, False]
]


@pytest.mark.parametrize("reduce, include_self", SCATTER_REDUCE)
def test_scatter_reduce_grads_and_tangent_match_autograd(reduce, include_self):
    # float64 only: torch has no autograd for complex scatter_reduce.
    self = torch.randn(3, 4, dtype=R)
    src = torch.randn(3, 6, dtype=R)  # wider than index: only a corner is read
    index = torch.tensor([[0, 0, 2], [1, 3, 1], [3, 3, 3]])

    def fn(s, r):  # torch's backward fails for a src larger than index: slice it
        r = r[:, :3]
        return torch.scatter_reduce(s, 1, index, r, reduce, include_self=include_self)

    y = fn(self, src)
    g = torch.randn_like(y)
    expected = vjp(fn, [self, src], g)
    got = F.scatter_reduce_grads(g, self, 1, index, src, reduce, include_self, y)
    close(got[0], expected[0])
    close(got[1], expected[1])
    st, rt = torch.randn_like(self), torch.randn_like(src)
    tangent = F.scatter_reduce_tangent(
        st, self, 1, index, rt, src, reduce, include_self, y
    )
    close(tangent, jvp(fn, [self, src], [st, rt]))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_amax_amin_share_among_ties(reduce, include_self):
    self = torch.tensor([[2.0, 0.0, 5.0]], dtype=R)
    src = torch.tensor([[2.0, 2.0, 1.0, 7.0]], dtype=R)
    index = torch.tensor([[0, 0, 1, 1]])

    def fn(s, r):
        return torch.scatter_reduce(s, 1, index, r, reduce, include_self=include_self)

    y = fn(self, src)
    g = torch.tensor([[3.0, 5.0, 7.0]], dtype=R)
    got = F.scatter_reduce_grads(g, self, 1, index, src, reduce, include_self, y)
    # Hand-computed: position 0 is 2 from self (when included) and src[0], src[1].
    # Position 1 is min(0, 1) = self's 0 or src's 1 (amin), max(0, 1, 7) = 7 (amax).
    tied = 1.0 if include_self else 1.5  # g[0] = 3 shared by 3 or by 2
    if reduce == "amax":
        hand_self, hand_src = [tied, 0, 7], [tied, tied, 0, 5]
    elif include_self:
        hand_self, hand_src = [tied, 5, 7], [tied, tied, 0, 0]
    else:
        hand_self, hand_src = [0, 0, 7], [tied, tied, 5, 0]
    if not include_self:
        hand_self[0] = 0.0
    close(got[0], torch.tensor([hand_self], dtype=R))
    close(got[1], torch.tensor([hand_src], dtype=R))
    if include_self:
        # torch agrees here; without self it still counts self's equal value among
        # the ties (src gets 1 each), then zeros self's share: 1 of g[0] is lost.
        expected = vjp(fn, [self, src], g)
        close(got[0], expected[0])
        close(got[1], expected[1])
    st, rt = torch.randn_like(self), torch.randn_like(src)
    tangent = F.scatter_reduce_tangent(
        st, self, 1, index, rt, src, reduce, include_self, y
    )
    close(tangent, jvp(fn, [self, src], [st, rt]))


def test_scatter_reduce_rejects_unsupported_reductions():
    x = torch.randn(2, 3)
    index = torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(NotImplementedError):
        F.scatter_reduce_grads(x, x, 1, index, x, "prod", True, x)
    with pytest.raises(NotImplementedError):
        F.scatter_reduce_tangent(x, x, 1, index, x, x, "prod", True, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_diag_grads_match_autograd(dtype):
    tensors = [
        torch.randn(2, 3, dtype=dtype),
        torch.randn(3, dtype=dtype),
        torch.randn((), dtype=dtype),
        torch.randn(0, 2, dtype=dtype),
        torch.randn(1, 2, dtype=dtype),
    ]
    y = torch.block_diag(*tensors)
    g = torch.randn_like(y)
    expected = vjp(torch.block_diag, tensors, g)
    got = F.block_diag_grads(g, tensors)
    assert len(got) == len(tensors)
    for a, b in zip(got, expected):
        close(a, b)


def test_block_diag_grads_take_the_real_part_for_real_inputs():
    tensors = [torch.randn(2, 2, dtype=R), torch.randn(1, 3, dtype=C)]
    y = torch.block_diag(*tensors)
    g = torch.randn_like(y)
    expected = vjp(torch.block_diag, tensors, g)
    got = F.block_diag_grads(g, tensors)
    assert got[0].dtype == R and got[1].dtype == C
    close(got[0], expected[0])
    close(got[1], expected[1])


# ---------------------------------------------------------------- element-wise


def test_angle_grad_and_tangent_match_autograd_for_complex_and_real():
    z = torch.randn(5, dtype=C)
    z[2] = 0
    g = torch.randn(5, dtype=R)
    (expected,) = vjp(torch.angle, [z], g)
    close(F.angle_grad(g, z), expected)
    t = torch.randn_like(z)
    close(F.angle_tangent(t, z), jvp(torch.angle, [z], [t]))
    assert F.angle_grad(g, z)[2] == 0 and F.angle_tangent(t, z)[2] == 0
    x = torch.randn(4, dtype=R)
    (expected,) = vjp(torch.angle, [x], torch.ones(4, dtype=R))
    close(F.angle_grad(torch.ones(4, dtype=R), x), expected)
    tx = torch.randn_like(x)
    close(F.angle_tangent(tx, x), jvp(torch.angle, [x], [tx]))


def test_angle_tangent_hand_computed():
    # angle(z) for z = 1 + 0j moving by i t: d angle = t.
    z = torch.tensor([1 + 0j, 0 + 2j], dtype=C)
    t = torch.tensor([1j, 1 + 0j], dtype=C)
    close(F.angle_tangent(t, z), torch.tensor([1.0, -0.5], dtype=R))


CLAMP_SHAPES = [
    ((3, 4), (3, 4), (4,)),
    ((3, 4), (4,), None),
    ((3, 4), None, (3, 1)),
]


def test_clamp_tensor_helpers_without_bounds_pass_self_through():
    x, g = torch.randn(3, dtype=R), torch.randn(3, dtype=R)
    grads = F.clamp_tensor_grads(g, x, None, None)
    assert grads[0] is g and grads[1] is None and grads[2] is None
    assert F.clamp_tensor_weight(x, None, None, "self").all()


@pytest.mark.parametrize("shapes", CLAMP_SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_clamp_tensor_grads_and_weights_match_autograd(shapes, ties):
    def make(shape):
        if shape is None:
            return None
        if ties:  # small integers: many ties, and crossed bounds (min > max)
            return torch.randint(-2, 3, shape).to(R)
        return torch.randn(shape, dtype=R)

    self, lo, hi = (make(s) for s in shapes)
    inputs = [v for v in (self, lo, hi) if v is not None]

    def fn(*args):
        it = iter(args)
        s = next(it)
        mn = next(it) if lo is not None else None
        mx = next(it) if hi is not None else None
        return torch.clamp(s, mn, mx)

    y = fn(*inputs)
    g = torch.randn_like(y)
    expected = iter(vjp(fn, inputs, g))
    got = F.clamp_tensor_grads(g, self, lo, hi)
    for value, grad in zip((self, lo, hi), got):
        if value is None:
            assert grad is None
        else:
            close(grad, next(expected))
    tangents = [torch.randn_like(v) for v in inputs]
    it = iter(tangents)
    st = next(it)
    lt = next(it) if lo is not None else None
    ht = next(it) if hi is not None else None
    tangent = st * F.clamp_tensor_weight(self, lo, hi, "self")
    if lo is not None:
        tangent = tangent + lt * F.clamp_tensor_weight(self, lo, hi, "min")
    if hi is not None:
        tangent = tangent + ht * F.clamp_tensor_weight(self, lo, hi, "max")
    close(tangent.expand(y.shape), jvp(fn, inputs, tangents))


@pytest.mark.parametrize("eps", [None, 0.1, 0.25])
def test_logit_derivative_matches_autograd(eps):
    x = torch.tensor([-0.5, 0.05, 0.2, 0.5, 0.8, 0.95, 1.5], dtype=R)
    g = torch.ones_like(x)
    (expected,) = vjp(lambda a: torch.logit(a, eps), [x], g)
    close(F.logit_derivative(x, eps), expected, equal_nan=True)
    assert F.logit_derivative(x, eps)[3] == 4  # 1 / (0.5 * 0.5)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_mvlgamma_derivative_matches_autograd(p):
    x = torch.rand(6, dtype=R) * 3 + (p - 1) / 2 + 0.1
    g = torch.ones_like(x)
    (expected,) = vjp(lambda a: torch.mvlgamma(a, p), [x], g)
    close(F.mvlgamma_derivative(x, p), expected)


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_unless_rounded_matches_div_backward(mode):
    a = torch.randn(3, 4, dtype=R)
    b = torch.randn(4, dtype=R).abs() + 0.5
    y = torch.div(a, b, rounding_mode=mode)
    g = torch.randn_like(y)
    ga, gb = vjp(lambda u, v: torch.div(u, v, rounding_mode=mode), [a, b], g)
    close(F.unbroadcast(F.unless_rounded(g / b, mode), a), ga)
    got_b = F.unbroadcast(F.unless_rounded(-g * (a / (b * b)), mode), b)
    close(got_b, gb)
    t = torch.randn(4, dtype=R)
    assert F.unless_rounded(t, None) is t
    assert torch.equal(F.unless_rounded(t, "floor"), torch.zeros(4, dtype=R))


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

    _, mean, rstd = torch.ops.aten.native_layer_norm(
        x, normalized_shape, weight, bias, 1e-5
    )
    t = torch.randn_like(x)
    got = F.layer_norm_tangent(t, x, weight, mean, rstd, normalized_shape)
    close(got, jvp(fn, [x], [t]))


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

    _, save_mean, save_invstd = run(x)
    t = torch.randn_like(x)
    got = F.batch_norm_tangent(
        t, x, weight, rm, rv, save_mean, save_invstd, training, eps
    )
    close(got, jvp(lambda a: run(a)[0], [x], [t]))
    xhat = F.batch_norm_xhat(x, rm, rv, save_mean, save_invstd, training, eps)
    close(xhat, run(x, None, None)[0])
    if weighted:
        wt, bt = torch.randn(c, dtype=R), torch.randn(c, dtype=R)
        expected = jvp(lambda w, b: run(x, w, b)[0], [weight, bias], [wt, bt])
        got = xhat * F.channel_view(wt, x.dim()) + F.channel_view(bt, x.dim())
        close(got, expected)


@pytest.mark.parametrize(
    "shape, group, weighted",
    [((2, 4, 3), 2, True), ((2, 6, 2, 2), 3, False), ((3, 4), 4, True)],
)
def test_group_norm_tangent_and_xhat_match_forward_ad(shape, group, weighted):
    x = torch.randn(shape, dtype=R)
    n, c = shape[:2]
    hxw = math.prod(shape[2:])
    weight = torch.randn(c, dtype=R) if weighted else None
    bias = torch.randn(c, dtype=R) if weighted else None

    def run(a, w=weight, b=bias):
        return torch.ops.aten.native_group_norm(a, w, b, n, c, hxw, group, 1e-5)

    _, mean, rstd = run(x)
    t = torch.randn_like(x)
    got = F.group_norm_tangent(t, x, weight, mean, rstd, group)
    close(got, jvp(lambda a: run(a)[0], [x], [t]))
    xhat = F.group_norm_xhat(x, mean, rstd, group)
    close(xhat, run(x, None, None)[0])
    if weighted:
        wt = torch.randn(c, dtype=R)
        expected = jvp(lambda w: run(x, w, bias)[0], [weight], [wt])
        close(xhat * F.channel_view(wt, x.dim()), expected)


@pytest.mark.parametrize(
    "shape, group, weighted",
    [((2, 4, 3), 2, True), ((2, 6, 2, 2), 3, False), ((3, 4), 4, True)],
)
def test_group_norm_statistics_tangents_and_backward_match_autograd(
    shape, group, weighted
):
    x = torch.randn(shape, dtype=R)
    n, c = shape[:2]
    hxw = math.prod(shape[2:])
    weight = torch.randn(c, dtype=R) if weighted else None
    bias = torch.randn(c, dtype=R) if weighted else None

    def run(a, w=weight, b=bias):
        return torch.ops.aten.native_group_norm(a, w, b, n, c, hxw, group, 1e-5)

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
    got = F.group_norm_backward(*grads, x, mean, rstd, weight, n, c, hxw, group, mask)
    for g, e in zip([g for g in got if g is not None], expected, strict=True):
        close(g, e)
