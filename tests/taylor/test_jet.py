"""dualgen.jet: Taylor series of any order, against written-out derivatives and
finite differences (oracles that share nothing with the formulas), against
dualgen's nested levels, and through autograd. The OpInfo sweep at order 3 is
tests/coverage/opinfo_jet.py."""

from __future__ import annotations

import math

import pytest
import torch

import dualgen

torch.manual_seed(0)
F64 = torch.float64


def _curve(n=5, order=3, dtype=F64):
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(n, dtype=dtype, generator=g)
    return x0, [torch.randn(n, dtype=dtype, generator=g) for _ in range(order)]


def test_sin_matches_the_written_out_derivatives():
    x0, (x1, x2, x3) = _curve()
    value, (y1, y2, y3) = dualgen.jet(torch.sin, (x0,), ([x1, x2, x3],))
    s, c = x0.sin(), x0.cos()
    torch.testing.assert_close(value, s)
    torch.testing.assert_close(y1, c * x1)
    torch.testing.assert_close(y2, -s * x1**2 + c * x2)
    torch.testing.assert_close(y3, -c * x1**3 - 3 * s * x1 * x2 + c * x3)


def test_product_follows_leibniz():
    a0, a = _curve()
    b0, b = _curve()
    b0, b = b0 + 1, [t * 2 for t in b]
    _, ys = dualgen.jet(torch.mul, (a0, b0), (a, b))
    A, B = [a0, *a], [b0, *b]
    for k, y in enumerate(ys, start=1):
        expected = sum(math.comb(k, i) * A[i] * B[k - i] for i in range(k + 1))
        torch.testing.assert_close(y, expected)


def _mlp(x):
    w1 = torch.linspace(-1, 1, 5 * 7, dtype=F64).reshape(5, 7)
    w2 = torch.linspace(0.5, -0.5, 7 * 3, dtype=F64).reshape(7, 3)
    h = torch.tanh(x @ w1 + 0.1)
    return torch.nn.functional.layer_norm(torch.softmax(h @ w2, -1), (3,)).exp()


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_mlp_matches_finite_differences(order):
    x0, series = _curve(order=order)
    _, ys = dualgen.jet(_mlp, (x0,), (series,))

    def g(t):
        return _mlp(
            x0 + sum(x * t**k / math.factorial(k) for k, x in enumerate(series, 1))
        )

    # Central differences of order `order` at step h (error O(h^2)).
    h = 1e-2
    stencil = {
        1: {1: 0.5, -1: -0.5},
        2: {1: 1, 0: -2, -1: 1},
        3: {2: 0.5, 1: -1, -1: 1, -2: -0.5},
        4: {2: 1, 1: -4, 0: 6, -1: -4, -2: 1},
    }[order]
    fd = sum(w * g(s * h) for s, w in stencil.items()) / h**order
    torch.testing.assert_close(ys[-1], fd, rtol=1e-3, atol=1e-4)


def test_matches_dualgen_nested_levels_where_torch_func_is_wrong():
    """layer_norm's second derivative: torch.func's nested jvp reads the saved
    statistics as constants at the outer level (docs/opinfo_nested.md)."""
    x0, (x1,) = _curve(order=1)

    def f(x):
        return torch.nn.functional.layer_norm(x, (5,))

    _, (_, y2) = dualgen.jet(f, (x0,), ([x1, torch.zeros_like(x1)],))
    # Along a line, y2 = D2f[x1, x1]: forward over forward at dualgen's levels.
    inner = lambda x: dualgen.func.jvp(f, (x,), (x1,))[1]
    nested = dualgen.func.jvp(inner, (x0,), (x1,))[1]
    torch.testing.assert_close(y2, nested)
    h = 1e-4
    fd = (f(x0 + h * x1) - 2 * f(x0) + f(x0 - h * x1)) / h**2
    torch.testing.assert_close(y2, fd, rtol=1e-4, atol=1e-5)


def test_laplacian_and_its_gradient_match_the_hessian_trace():
    w = torch.randn(4, 6, dtype=F64, requires_grad=True)

    def f(x):
        return torch.tanh(x @ w).pow(3).sum()

    x = torch.randn(4, dtype=F64)
    eye = torch.eye(4, dtype=F64)
    laplacian = sum(
        dualgen.jet(f, (x,), ([e, torch.zeros_like(e)],))[1][1] for e in eye
    )
    expected = torch.func.hessian(f)(x).trace()
    torch.testing.assert_close(laplacian, expected)
    (grad,) = torch.autograd.grad(laplacian, w)
    (expected_grad,) = torch.autograd.grad(expected, w)
    torch.testing.assert_close(grad, expected_grad)


def test_complex_curve():
    x0, series = _curve(dtype=torch.complex128)
    _, ys = dualgen.jet(torch.tanh, (x0,), (series,))
    x1, x2, x3 = series
    t = x0.tanh()
    d1 = 1 - t**2  # tanh' ; tanh'' = -2 t d1 ; tanh''' = -2 d1 (d1 - 2 t^2)
    d2, d3 = -2 * t * d1, -2 * d1 * (d1 - 2 * t**2)
    torch.testing.assert_close(ys[0], d1 * x1)
    torch.testing.assert_close(ys[1], d2 * x1**2 + d1 * x2)
    torch.testing.assert_close(ys[2], d3 * x1**3 + 3 * d2 * x1 * x2 + d1 * x3)


def test_views_and_in_place_updates_carry_the_series():
    x0, series = _curve(n=6)

    def f(x):
        y = x.clone().reshape(2, 3)
        y[0].mul_(y[1])  # in place through a view of y
        y.t()[1].sin_()
        return y

    def plain(x):
        y = x.reshape(2, 3)
        top = y[0] * y[1]
        rows = torch.stack([top, y[1]])
        return torch.cat([rows[:, :1], rows[:, 1:2].sin(), rows[:, 2:]], 1)

    _, got = dualgen.jet(f, (x0,), (series,))
    _, expected = dualgen.jet(plain, (x0,), (series,))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_a_user_rule_is_evaluated_by_its_formula():
    lib = torch.library.Library("dualgen_jet_test", "DEF")  # noqa: TOR901
    lib.define("cube(Tensor x) -> Tensor")
    lib.impl("cube", lambda x: x * x * x, "CompositeExplicitAutograd")
    op = torch.ops.dualgen_jet_test.cube.default
    dualgen.register_jvp(op)(lambda x_p, x_t: 3 * x_p * x_p * x_t)
    try:
        x0, series = _curve()
        _, got = dualgen.jet(op, (x0,), (series,))
        _, expected = dualgen.jet(lambda x: x * x * x, (x0,), (series,))
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)
    finally:
        dualgen.unregister_jvp(op)


def test_an_op_without_a_rule_is_named():
    lib = torch.library.Library("dualgen_jet_none", "DEF")  # noqa: TOR901
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
    x0, series = _curve()
    with pytest.raises(NotImplementedError, match="twice"):
        dualgen.jet(torch.ops.dualgen_jet_none.twice, (x0,), (series,))


@pytest.mark.parametrize(
    "primals, series, message",
    [
        ((torch.ones(2),), ([torch.ones(2)], [torch.ones(2)]), "1 primals but 2"),
        ((torch.ones(2), torch.ones(2)), ([torch.ones(2)], []), "same order"),
        ((torch.ones(2),), ([],), "order >= 1"),
        ((torch.ones(2),), ([torch.ones(3)],), r"shape \(3,\)"),
        ((torch.ones(2),), ([torch.ones(2, dtype=F64)],), "dtype torch.float64"),
        ((torch.ones(2, dtype=torch.long),), ([torch.ones(2)],), "not a float"),
    ],
)
def test_bad_series_are_refused_clearly(primals, series, message):
    with pytest.raises((ValueError, TypeError), match=message):
        dualgen.jet(torch.sin, primals, series)


def test_outputs_mirror_fun_and_constants_have_zero_series():
    x0, series = _curve(order=2)
    values, ys = dualgen.jet(
        lambda x: {"a": x.sin(), "b": (x.exp(), torch.ones(3))}, (x0,), (series,)
    )
    assert set(values) == {"a", "b"} and len(ys["b"]) == 2
    assert all(torch.equal(y, torch.zeros(3)) for y in ys["b"][1])


def test_code_writing_series_into_plain_tensors_runs_through_its_functional_graph():
    """Circular padding fills a tensor made by torch.empty in place: a plain tensor
    cannot hold a series, so dualgen.jet takes the function's functional graph."""
    x0, series = _curve()
    x0, series = x0.reshape(1, 5), [s.reshape(1, 5) for s in series]

    def f(x):
        return torch.nn.functional.pad(x.sin(), (2, 2), mode="circular")

    value, got = dualgen.jet(f, (x0,), (series,))
    _, inner = dualgen.jet(torch.sin, (x0,), (series,))
    torch.testing.assert_close(value, f(x0))
    for a, b in zip(got, inner):
        torch.testing.assert_close(
            a, torch.nn.functional.pad(b, (2, 2), mode="circular")
        )


def test_vmap_over_data_and_directions():
    """torch.vmap batches the series' coefficients (over data, and over the
    directions of a Laplacian inside): each datum's Hessian trace."""
    w = torch.randn(4, 6, dtype=F64)

    def f(x):
        return torch.nn.functional.softplus(x @ w).square().sum()

    def along(x, v):
        return dualgen.jet(f, (x,), ([v, None],))[1][1]

    def laplacian(x):
        return torch.vmap(lambda v: along(x, v))(torch.eye(4, dtype=F64)).sum()

    xs = torch.randn(3, 4, dtype=F64)
    expected = torch.stack([torch.func.hessian(f)(x).trace() for x in xs])
    torch.testing.assert_close(torch.vmap(laplacian)(xs), expected)
