"""dualgen.operators (collapsed Taylor mode) and dualgen.fx.jet, against
torch.func's Hessians and fourth derivatives, replayed random directions, and
the per-direction sums the collapse must equal."""

from __future__ import annotations

import pytest
import torch

import dualgen
import dualgen.fx
import dualgen.operators as ops
from dualgen.operators import collapse

F64 = torch.float64


def _net(dim=4, out=1):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(dim, 8), torch.nn.Tanh(), torch.nn.Linear(8, 6),
        torch.nn.Softplus(), torch.nn.Linear(6, out),
    ).double()  # fmt: skip


def _hessian_traces(f, x):
    """Δ of every output element of f at x (any shapes)."""
    h = torch.func.jacfwd(torch.func.jacrev(f))(x)
    out = f(x).shape
    h = h.reshape(*out, x.numel(), x.numel())
    return h.diagonal(dim1=-2, dim2=-1).sum(-1)


def test_laplacian_of_a_module_matches_the_hessian_trace():
    net = _net(out=3)
    g = ops.laplacian(net)
    x = torch.randn(4, dtype=F64)
    value, lap = g(x)
    torch.testing.assert_close(value, net(x))
    torch.testing.assert_close(lap, _hessian_traces(net, x))
    assert g.collapsed()


def test_laplacian_over_a_matrix_input():
    w = torch.randn(6, 2, dtype=F64)

    def f(x):  # x: (2, 3)
        return torch.tanh(x.T @ x @ w.T[:, :3].T).sum(0).exp()

    x = torch.randn(2, 3, dtype=F64)
    _, lap = ops.laplacian(f)(x)
    torch.testing.assert_close(lap, _hessian_traces(f, x))


def test_vmap_and_autograd_through_the_laplacian():
    net = _net()
    g = ops.laplacian(net)
    xs = torch.randn(5, 4, dtype=F64)
    _, laps = torch.vmap(g)(xs)
    expected = torch.stack([_hessian_traces(net, x) for x in xs])
    torch.testing.assert_close(laps, expected)
    params = list(net.parameters())
    grads = torch.autograd.grad(laps.pow(2).sum(), params, allow_unused=True)
    reference = torch.autograd.grad(expected.pow(2).sum(), params, allow_unused=True)
    for a, b in zip(grads, reference):
        if b is None:
            assert a is None or torch.all(a == 0)
        else:
            torch.testing.assert_close(a, b)


def test_training_updates_reach_the_built_program():
    net = _net()
    g = ops.laplacian(net)
    x = torch.randn(4, dtype=F64)
    g(x)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(1.5)
    torch.testing.assert_close(g(x)[1], _hessian_traces(net, x))


@pytest.mark.parametrize("kind", ["rademacher", "normal"])
def test_randomized_laplacian_is_the_mean_of_its_directions(kind):
    net = _net()
    x = torch.randn(4, dtype=F64)
    g = ops.laplacian(net, randomization=(kind, 7))
    torch.manual_seed(3)
    _, estimate = g(x)
    torch.manual_seed(3)
    if kind == "normal":
        vs = torch.randn(7, 4, dtype=F64)
    else:
        vs = torch.randint(0, 2, (7, 4), dtype=F64) * 2 - 1
    h = torch.func.hessian(lambda y: net(y).squeeze(-1))(x)
    torch.testing.assert_close(
        estimate.squeeze(), torch.einsum("si,ij,sj->", vs, h, vs) / 7
    )


def test_weighted_laplacian():
    net = _net()
    x = torch.randn(4, dtype=F64)
    s = torch.randn(4, 2, dtype=F64)

    def apply_s(x, v):  # torch-jet's convention: V @ S(x).T, S(x) = s * (1 + x²)
        return v @ (s * (1 + x.square())[:, None]).T

    _, lap = ops.laplacian(net, weighting=(apply_s, 2))(x)
    big_s = s * (1 + x.square())[:, None]
    h = torch.func.hessian(lambda y: net(y).squeeze(-1))(x)
    torch.testing.assert_close(lap.squeeze(), (big_s @ big_s.T * h).sum())


def _fourth_derivatives(f, x):
    return torch.func.jacfwd(torch.func.jacfwd(torch.func.hessian(f)))(x)


def test_bilaplacian_matches_fourth_derivatives():
    net = _net(dim=3)

    def f(y):
        return net(y).squeeze(-1)

    x = torch.randn(3, dtype=F64)
    g = ops.bilaplacian(net)
    _, value = g(x)
    expected = torch.einsum("iijj->", _fourth_derivatives(f, x))
    torch.testing.assert_close(value.squeeze(), expected)
    assert g.collapsed()


def test_randomized_bilaplacian_is_a_third_of_the_mean_fourth_derivative():
    net = _net(dim=3)
    x = torch.randn(3, dtype=F64)
    torch.manual_seed(4)
    _, estimate = ops.bilaplacian(net, randomization=("normal", 5))(x)
    torch.manual_seed(4)
    vs = torch.randn(5, 3, dtype=F64)
    d4 = _fourth_derivatives(lambda y: net(y).squeeze(-1), x)
    expected = torch.einsum("ijkl,si,sj,sk,sl->", d4, vs, vs, vs, vs) / 15
    torch.testing.assert_close(estimate.squeeze(), expected)


def test_an_uncollapsible_program_sums_per_direction(monkeypatch):
    monkeypatch.setattr(collapse, "_degrees", lambda *a: None)
    net = _net()
    g = ops.laplacian(net)
    x = torch.randn(4, dtype=F64)
    torch.testing.assert_close(g(x)[1], _hessian_traces(net, x))
    assert not g.collapsed()


def test_a_wrong_collapse_is_refused_when_built(monkeypatch):
    """Degrees read wrong (every lower node taken for the top one): the built
    program disagrees with the per-direction sums, so the sum is used instead."""
    real = collapse._degrees

    def wrong(top, x0, parameters, order):
        return {
            n: (order if d else 0) for n, d in real(top, x0, parameters, order).items()
        }

    monkeypatch.setattr(collapse, "_degrees", wrong)
    net = _net()
    g = ops.laplacian(net)
    x = torch.randn(4, dtype=F64)
    torch.testing.assert_close(g(x)[1], _hessian_traces(net, x))
    assert not g.collapsed()


@pytest.mark.parametrize(
    "make",
    [
        lambda f: ops.laplacian(f, randomization=("uniform", 4)),
        lambda f: ops.laplacian(f, randomization=("normal", 0)),
        lambda f: ops.bilaplacian(f, randomization=("rademacher", 4)),
    ],
)
def test_bad_randomization_is_refused(make):
    with pytest.raises(ValueError, match="randomization"):
        make(torch.sin)


def test_fx_jet_program_matches_the_eager_jet_and_takes_in_place_code():
    w = torch.randn(4, 3, dtype=F64)

    def f(x):
        y = torch.tanh(x @ w).clone()
        y[0].mul_(2)
        return y.sum(), torch.nn.functional.pad(x, (1, 1), mode="circular")

    x = torch.randn(2, 4, dtype=F64)
    series = [torch.randn(2, 4, dtype=F64) for _ in range(3)]
    program = dualgen.fx.jet(f, (x,), 3)
    other = torch.randn(2, 4, dtype=F64)
    (total, padded), (total_series, pad_series) = program(other, [series])

    def g(x):
        y = torch.tanh(x @ w).clone()
        y[0].mul_(2)
        return y.sum()

    value, expected = dualgen.jet(g, (other,), (series,))
    torch.testing.assert_close(total, value)
    torch.testing.assert_close(
        padded, torch.nn.functional.pad(other, (1, 1), mode="circular")
    )
    for a, b in zip(total_series, expected):
        torch.testing.assert_close(a, b)
    for a, s in zip(pad_series, series):  # pad is linear: its series is padded
        torch.testing.assert_close(
            a, torch.nn.functional.pad(s, (1, 1), mode="circular")
        )
    assert "aten" in program.code and "dualgen" not in program.code
