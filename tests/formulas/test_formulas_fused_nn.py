"""The helpers of dualgen.formulas.fused_nn (grid sampling, CTC loss, cdist,
embedding bags), against torch's own autograd of the ops they serve, adjoint
identities with native kernels, or central finite differences; float64."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def central(fn, x, v, eps=1e-6):
    return (fn(x + eps * v) - fn(x - eps * v)) / (2 * eps)


# ---------------------------------------------------------------- cdist


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 1.5, float("inf")])
def test_cdist_weights_match_cdist_gradients(p):
    x1, x2 = torch.randn(2, 3, 4, dtype=R), torch.randn(2, 5, 4, dtype=R)
    dist = torch.cdist(x1, x2, p=p)
    g = torch.randn_like(dist)
    g1, g2 = vjp(lambda a, b: torch.cdist(a, b, p=p), [x1, x2], g)
    w = F.cdist_weights(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, dist)
    close((g.unsqueeze(-1) * w).sum(-2), g1)
    close(-(g.unsqueeze(-1) * w).sum(-3), g2)


def test_cdist_weights_vanish_at_zero_distance():
    x = torch.randn(3, 4, dtype=R)
    dist = torch.cdist(x, x)
    w = F.cdist_weights(x.unsqueeze(-2) - x.unsqueeze(-3), 2.0, dist)
    assert w.diagonal(0, 0, 1).abs().max() == 0


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 1.5, 0.5, float("inf")])
def test_cdist_weights_derivatives_match_forward_ad(p):
    diff = torch.randn(3, 5, 4, dtype=R)
    dist = torch.rand(3, 5, dtype=R) + 0.5
    dv, tv = torch.randn_like(diff), torch.randn_like(dist)
    expected = jvp(lambda d, s: F.cdist_weights(d, p, s), [diff, dist], [dv, tv])
    actual = F.cdist_weights_diff_derivative(
        diff, p, dist
    ) * dv + F.cdist_weights_dist_derivative(diff, p, dist) * tv.unsqueeze(-1)
    close(actual, expected)


# ---------------------------------------------------------------- CTC loss


@pytest.mark.parametrize("as_tensors", [False, True])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_log_probs_grad_matches_finite_differences(as_tensors, zero_infinity):
    log_probs = torch.randn(6, 3, 4, dtype=R)  # not normalized: the true gradient
    targets = torch.tensor([[1, 2, 2], [1, 3, 0], [2, 2, 2]])
    input_lengths, target_lengths = [6, 5, 4], [3, 2, 3]  # the last is impossible
    if as_tensors:
        input_lengths = torch.tensor(input_lengths)
        target_lengths = torch.tensor(target_lengths)

    def nll(lp):
        out = torch.ops.aten._ctc_loss(
            lp, targets, input_lengths, target_lengths, 0, zero_infinity
        )[0]
        return out[:2]  # _ctc_loss leaves the impossible one inf (ctc_loss zeroes it)

    result0, log_alpha = torch.ops.aten._ctc_loss(
        log_probs, targets, input_lengths, target_lengths, 0, zero_infinity
    )
    g = torch.randn(3, dtype=R)
    if not zero_infinity:
        g[2] = 0  # the impossible sample's gradient is nan
    grad = F.ctc_loss_log_probs_grad(
        g,
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        result0,
        log_alpha,
        0,
        zero_infinity,
    )
    v = torch.randn_like(log_probs)
    expected = (central(nll, log_probs, v) * g[:2]).sum()
    if zero_infinity:
        assert grad[:, 2].abs().max() == 0
    close(torch.nan_to_num(grad * v).sum(), expected, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- grid sampling

MODES = [(i, p, ac) for i in (0, 1, 2) for p in (0, 1, 2) for ac in (False, True)]


def grid_case(nd):
    if nd == 2:
        x, grid = torch.randn(2, 3, 4, 5, dtype=R), torch.randn(2, 3, 2, 2, dtype=R)
        ops = torch.ops.aten.grid_sampler_2d, torch.ops.aten.grid_sampler_2d_backward
    else:
        x, grid = torch.randn(2, 2, 3, 4, 3, dtype=R), torch.randn(
            2, 2, 3, 2, 3, dtype=R
        )
        ops = torch.ops.aten.grid_sampler_3d, torch.ops.aten.grid_sampler_3d_backward
    return x, grid * 1.3, ops


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_grid_sampler_helpers_match_native(nd, mode):
    if nd == 3 and mode[0] == 2:
        pytest.skip("no bicubic in 3-d")
    x, grid, (op, backward) = grid_case(nd)
    grid_t = torch.randn_like(grid)
    tangent = F.grid_sampler_grid_derivative("tangent", None, x, grid, grid_t, *mode)
    close(
        tangent, central(lambda g: op(x, g, *mode), grid, grid_t), rtol=1e-6, atol=1e-7
    )
    go = torch.randn_like(tangent)
    (grid_grad,) = vjp(lambda g: op(x, g, *mode), [grid], go)
    close((grid_grad * grid_t).sum(), (go * tangent).sum())

    def grads(g):
        return backward(go, x, g, *mode, [True, True])

    close(
        F.grid_sampler_grid_derivative("tangent_adjoint", go, x, grid, grid_t, *mode),
        central(lambda g: grads(g)[0], grid, grid_t),
        rtol=1e-6,
        atol=1e-7,
    )
    close(
        F.grid_sampler_grid_derivative("second", go, x, grid, grid_t, *mode),
        central(lambda g: grads(g)[1], grid, grid_t),
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize(
    "mode", [(0, 0, False), (0, 2, True), (2, 1, False), (1, 0, True)]
)
@pytest.mark.parametrize("present", [(True, True), (True, False), (False, True)])
def test_grid_sampler_backward_grads_are_the_adjoint(nd, mode, present):
    if nd == 3 and mode[0] == 2:
        pytest.skip("no bicubic in 3-d")
    x, grid, (op, backward) = grid_case(nd)
    go = torch.randn_like(op(x, grid, *mode))
    gi = torch.randn_like(x) if present[0] else None
    gg = torch.randn_like(grid) if present[1] else None
    grads = F.grid_sampler_backward_grads(gi, gg, go, x, grid, *mode)
    tangents = [torch.randn_like(go), torch.randn_like(x), torch.randn_like(grid)]

    def outputs(s):
        gi_, gg_ = backward(
            go + s * tangents[0],
            x + s * tangents[1],
            grid + s * tangents[2],
            *mode,
            [True, True],
        )
        total = torch.zeros((), dtype=R)
        if gi is not None:
            total = total + (gi * gi_).sum()
        if gg is not None:
            total = total + (gg * gg_).sum()
        return total

    eps = 1e-6
    expected = (outputs(eps) - outputs(-eps)) / (2 * eps)
    actual = sum((g * t).sum() for g, t in zip(grads, tangents) if g is not None)
    close(actual, expected, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- embedding bags


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 1])
def test_embedding_bag_dense_backward_grads_are_the_adjoint(
    mode, scale_grad_by_freq, padding_idx
):
    indices = torch.tensor([1, 2, 4, 1, 0, 4])
    offset2bag = torch.tensor([0, 0, 1, 2, 2, 2])
    bag_size = torch.tensor([2, 1, 3, 0])
    maximum_indices = torch.tensor([[1, 2, 1], [4, 4, 4], [0, 4, 1], [0, 0, 0]])
    bags = (indices, offset2bag, bag_size, maximum_indices)
    psw = torch.randn(6, dtype=R) if mode == 0 else None
    grad = torch.randn(4, 3, dtype=R)

    def op(gr, w):
        return torch.ops.aten._embedding_bag_dense_backward(
            gr, *bags, 5, scale_grad_by_freq, mode, w, padding_idx
        )

    out = op(grad, psw)
    g = torch.randn_like(out)
    grad_grad, psw_grad = F.embedding_bag_dense_backward_grads(
        g, grad, *bags, scale_grad_by_freq, mode, psw, padding_idx
    )
    v = torch.randn_like(grad)
    close((op(v, psw) * g).sum(), (grad_grad * v).sum())
    if psw is None:
        assert psw_grad is None
    else:
        u = torch.randn_like(psw)
        close((op(grad, u) * g).sum(), (psw_grad * u).sum())


def test_embedding_bag_dense_backward_grads_rebuild_offset2bag():
    # Sum mode leaves offset2bag empty; _embedding_bag_backward rebuilds it.
    indices, offsets = torch.tensor([1, 2, 4, 1, 0, 4]), torch.tensor([0, 2, 3])
    grad, psw = torch.randn(3, 3, dtype=R), torch.randn(6, dtype=R)
    empty, bag_size, maxi = (
        torch.tensor([], dtype=torch.long),
        torch.tensor([2, 1, 3]),
        torch.zeros(3, dtype=torch.long),
    )

    def op(gr, w):
        return torch.ops.aten._embedding_bag_backward(
            gr, indices, offsets, empty, bag_size, maxi, 5, False, 0, False, w, -1
        )

    g = torch.randn(5, 3, dtype=R)
    grad_grad, psw_grad = F.embedding_bag_dense_backward_grads(
        g, grad, indices, empty, bag_size, maxi, False, 0, psw, -1, offsets
    )
    v, u = torch.randn_like(grad), torch.randn_like(psw)
    close((op(v, psw) * g).sum(), (grad_grad * v).sum())
    close((op(grad, u) * g).sum(), (psw_grad * u).sum())


# ---------------------------------------------------------------- the CUDA RNN cells
# The cells written out (what the fused kernels compute, workspace included), and
# their backward kernels written out from the workspace; the helpers against torch's
# forward AD and autograd of these.


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    t = cy.tanh()
    gc = grad_hy * o * (1 - t * t) + grad_cy
    gates = torch.cat(
        [gc * g * i * (1 - i), gc * cx * f * (1 - f), gc * i * (1 - g * g)]
        + [grad_hy * t * o * (1 - o)],
        1,
    )
    if not has_bias:
        return gates, gc * f
    return gates, gc * f, gates.sum(0)


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    xr, xz, xn = input_gates.chunk(3, 1)
    hr, hz, hn = hidden_gates.chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    gn = grad_hy * (1 - z) * (1 - n * n)
    gz = grad_hy * (hx - n) * z * (1 - z)
    gr = gn * hn * r * (1 - r)
    gi, gh = torch.cat([gr, gz, gn], 1), torch.cat([gr, gz, gn * r], 1)
    if not has_bias:
        return gi, gh, grad_hy * z
    return gi, gh, grad_hy * z, gi.sum(0), gh.sum(0)


def _cell_inputs(gates, with_bias, hidden=3, batch=2):
    shapes = [(batch, gates * hidden)] * 2 + [(batch, hidden)]
    if with_bias:
        shapes += [(gates * hidden,)] * 2
    return [torch.randn(*s, dtype=R) for s in shapes]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_fused_lstm_cell_tangents_and_grads(with_bias):
    primals = _cell_inputs(4, with_bias)
    tangents = [torch.randn_like(p) for p in primals]
    absent = [None, None] if not with_bias else []
    got = F.fused_lstm_cell_tangents(*tangents, *absent, *primals, *absent)
    close(list(got), list(jvp(_lstm_cell, primals, tangents)))
    outputs = _lstm_cell(*primals)
    for present in ([0, 1, 2], [0], [1], [2]):
        grads = [
            torch.randn_like(o) if k in present else None for k, o in enumerate(outputs)
        ]
        expected = vjp(
            _lstm_cell,
            primals,
            [torch.zeros_like(o) if g is None else g for g, o in zip(grads, outputs)],
        )
        got = F.fused_lstm_cell_grads(*grads, *primals[:3], *(primals[3:] or absent))
        close(list(got[: len(primals)]), list(expected))
        if not with_bias:
            assert got[3] is None and got[4] is None


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_fused_gru_cell_tangents_and_grads(with_bias):
    primals = _cell_inputs(3, with_bias)
    tangents = [torch.randn_like(p) for p in primals]
    absent = [None, None] if not with_bias else []
    got = F.fused_gru_cell_tangents(*tangents, *absent, *primals, *absent)
    close(list(got), list(jvp(_gru_cell, primals, tangents)))
    outputs = _gru_cell(*primals)
    for present in ([0, 1], [0], [1]):
        grads = [
            torch.randn_like(o) if k in present else None for k, o in enumerate(outputs)
        ]
        expected = vjp(
            _gru_cell,
            primals,
            [torch.zeros_like(o) if g is None else g for g, o in zip(grads, outputs)],
        )
        got = F.fused_gru_cell_grads(*grads, *primals[:3], *(primals[3:] or absent))
        close(list(got[: len(primals)]), list(expected))


@pytest.mark.parametrize("has_bias", [True, False])
def test_fused_lstm_cell_backward_tangents_and_grads(has_bias):
    hy, cy, workspace = _lstm_cell(*_cell_inputs(4, False))
    cx = torch.randn_like(cy)
    primals = [torch.randn_like(hy), torch.randn_like(cy), cx, cy, workspace]
    tangents = [torch.randn_like(p) for p in primals]
    backward = lambda *a: _lstm_cell_backward(*a, has_bias)
    got = F.fused_lstm_cell_backward_tangents(*tangents, *primals, has_bias)
    expected = jvp(backward, primals, tangents)
    close(list(got[:2]), list(expected[:2]))
    if has_bias:
        close(got[2], expected[2])
    else:
        assert got[2] is None
    outputs = backward(*primals)
    grads = [torch.randn_like(o) for o in outputs]
    got = F.fused_lstm_cell_backward_grads(
        *grads[:2], grads[2] if has_bias else None, *primals
    )
    close(list(got), list(vjp(backward, primals, grads)))
    # absent gradients of the backward's inputs are zeros
    none_in = F.fused_lstm_cell_backward_tangents(
        *tangents[:1], None, *tangents[2:], primals[0], None, *primals[2:], has_bias
    )
    zero_in = F.fused_lstm_cell_backward_tangents(
        tangents[0],
        torch.zeros_like(cy),
        *tangents[2:],
        primals[0],
        torch.zeros_like(cy),
        *primals[2:],
        has_bias,
    )
    close(list(none_in[:2]), list(zero_in[:2]))


@pytest.mark.parametrize("has_bias", [True, False])
def test_fused_gru_cell_backward_tangents_and_grads(has_bias):
    _, workspace = _gru_cell(*_cell_inputs(3, False))
    primals = [torch.randn(2, 3, dtype=R), workspace]
    tangents = [torch.randn_like(p) for p in primals]
    backward = lambda *a: _gru_cell_backward(*a, has_bias)
    got = F.fused_gru_cell_backward_tangents(*tangents, *primals, has_bias)
    expected = jvp(backward, primals, tangents)
    close(list(got[: len(expected)]), list(expected))
    if not has_bias:
        assert got[3] is None and got[4] is None
    outputs = backward(*primals)
    grads = [torch.randn_like(o) for o in outputs]
    padded = grads + [None] * (5 - len(grads))
    got = F.fused_gru_cell_backward_grads(*padded, *primals)
    close(list(got), list(vjp(backward, primals, grads)))
