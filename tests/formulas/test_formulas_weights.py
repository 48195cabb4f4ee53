"""The helpers that differentiate the arguments native takes as constants (losses'
weights, a batch norm's running statistics) and those of the rules native lacks
(index_reduce, pdist's backward, _masked_softmax's dim), each against autograd or
torch.func of the op written out in plain ops, or against torch's own op; float64."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


LABELS = torch.tensor([0, 2, 4, 1, 2, 3])


def _nll_written_out(x, w, target, reduction, ignore_index):
    """nll_loss_forward's (output, total_weight) in plain ops."""
    valid = target != ignore_index
    safe = torch.where(valid, target, 0)
    wy = torch.where(valid, w[safe], 0.0)
    terms = -x.gather(1, safe.unsqueeze(1)).squeeze(1) * wy
    if reduction == 0:
        return terms, torch.zeros((), dtype=x.dtype)
    total = wy.sum()
    return (terms.sum() / total if reduction == 1 else terms.sum()), total


@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_weight_helpers_match_the_loss_written_out(reduction, ignore_index):
    x, w = torch.randn(6, 5, dtype=R), torch.rand(5, dtype=R) + 0.5
    wt = torch.randn(5, dtype=R)
    output, total = torch.ops.aten.nll_loss_forward(
        x, LABELS, w, reduction, ignore_index
    )
    out_t, total_t = torch.func.jvp(
        lambda v: _nll_written_out(x, v, LABELS, reduction, ignore_index), (w,), (wt,)
    )[1]
    close(
        F.nll_loss_weight_tangent(
            wt, x, LABELS, reduction, ignore_index, output, total
        ),
        out_t,
    )
    close(
        F.nll_loss_total_weight_tangent(wt, LABELS, reduction, ignore_index, total),
        total_t,
    )
    g_out, g_total = torch.randn_like(output), torch.randn(())
    (expected,) = vjp(
        lambda v: sum(
            (o * g).sum()
            for o, g in zip(
                _nll_written_out(x, v, LABELS, reduction, ignore_index),
                (g_out, g_total),
            )
        ),
        [w],
        torch.ones((), dtype=R),
    )
    got = F.nll_loss_weight_grad(
        g_out, g_total, x, LABELS, w, reduction, ignore_index, output, total
    )
    close(got, expected)


def _nll_backward_written_out(go, x, w, tw, target, reduction, ignore_index):
    valid = target != ignore_index
    safe = torch.where(valid, target, 0)
    scale = -torch.where(valid, w[safe], 0.0) * go
    if reduction == 1:
        scale = scale / tw
    return torch.zeros_like(x).scatter(
        1, safe.unsqueeze(1), scale.expand(target.shape).unsqueeze(1)
    )


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_backward_weight_helpers_match_the_backward_written_out(reduction):
    x, w, tw = (
        torch.randn(6, 5, dtype=R),
        torch.rand(5, dtype=R) + 0.5,
        torch.tensor(2.5, dtype=R),
    )
    go = torch.randn(6, dtype=R) if reduction == 0 else torch.randn((), dtype=R)
    result = torch.ops.aten.nll_loss_backward(go, x, LABELS, w, reduction, 3, tw)
    close(result, _nll_backward_written_out(go, x, w, tw, LABELS, reduction, 3))
    grad = torch.randn_like(result)
    gw, gtw = vjp(
        lambda v, t: _nll_backward_written_out(go, x, v, t, LABELS, reduction, 3),
        [w, tw],
        grad,
    )
    close(F.nll_backward_weight_grad(grad, go, LABELS, w, reduction, 3, tw), gw)
    close(F.nll_backward_total_weight_grad(grad, result, reduction, tw), gtw)
    twt = torch.tensor(0.7, dtype=R)
    expected = jvp(
        lambda t: _nll_backward_written_out(go, x, w, t, LABELS, reduction, 3),
        [tw],
        [twt],
    )
    close(F.nll_backward_total_weight_tangent(result, twt, tw, reduction), expected)


def _multi_margin_written_out(x, w, target, p, margin):
    picked = x.gather(1, target.unsqueeze(1))
    hinge = (margin - picked + x).clamp_min(0).pow(p)
    hinge = hinge.scatter(1, target.unsqueeze(1), 0.0)
    return w[target] * hinge.sum(1) / x.shape[1]


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_multi_margin_weight_helpers_match_the_loss_written_out(reduction):
    x, w, wt = (
        torch.randn(6, 5, dtype=R),
        torch.rand(5, dtype=R) + 0.5,
        torch.randn(5, dtype=R),
    )
    terms = F.multi_margin_loss_weight_terms(x, LABELS, 2, 0.7, wt)
    close(
        terms, jvp(lambda v: _multi_margin_written_out(x, v, LABELS, 2, 0.7), [w], [wt])
    )
    reduced = torch.ops.aten.multi_margin_loss(x, LABELS, 2, 0.7, w, reduction)
    grad = torch.randn_like(reduced)
    (expected,) = vjp(
        lambda v: F.apply_loss_reduction(
            _multi_margin_written_out(x, v, LABELS, 2, 0.7), reduction
        ),
        [w],
        grad,
    )
    close(
        F.multi_margin_loss_weight_grad(grad, x, LABELS, 2, 0.7, w, reduction), expected
    )


def test_bce_logits_pos_weight_derivative_matches_the_loss_written_out():
    x, y = torch.randn(4, 3, dtype=R), torch.rand(4, 3, dtype=R)
    w, pw = torch.rand(3, dtype=R) + 0.5, torch.rand(3, dtype=R) + 0.5

    def loss(v):
        return -w * (
            v * y * torch.nn.functional.logsigmoid(x)
            + (1 - y) * torch.nn.functional.logsigmoid(-x)
        )

    (expected,) = vjp(lambda v: loss(v).sum(), [pw], torch.ones((), dtype=R))
    close(F.bce_logits_pos_weight_derivative(x, y, w).sum(0), expected)


def _eval_batch_norm(x, w, rm, rv, eps=1e-5):
    shape = [1, -1] + [1] * (x.dim() - 2)
    return (x - rm.view(shape)) / (rv.view(shape) + eps).sqrt() * w.view(shape)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4)])
def test_batch_norm_running_statistics_helpers_match_eval_mode_written_out(shape):
    x, w = torch.randn(shape, dtype=R), torch.randn(3, dtype=R)
    rm, rv = torch.randn(3, dtype=R), torch.rand(3, dtype=R) + 0.5
    rmt, rvt = torch.randn(3, dtype=R), torch.randn(3, dtype=R)
    expected = jvp(lambda a, b: _eval_batch_norm(x, w, a, b), [rm, rv], [rmt, rvt])
    close(F.batch_norm_stats_tangent(x, w, rm, rmt, rv, rvt, False, 1e-5), expected)
    assert F.batch_norm_stats_tangent(x, w, rm, rmt, rv, rvt, True, 1e-5).dim() == 0
    grad = torch.randn(shape, dtype=R)
    g_mean, g_var = vjp(lambda a, b: _eval_batch_norm(x, w, a, b), [rm, rv], grad)
    close(F.batch_norm_running_mean_grad(grad, x, w, rm, rv, False, 1e-5), g_mean)
    close(F.batch_norm_running_var_grad(grad, x, w, rm, rv, False, 1e-5), g_var)
    zero = torch.zeros(3, dtype=R)
    close(F.batch_norm_running_mean_grad(grad, x, w, rm, rv, True, 1e-5), zero)
    close(F.batch_norm_running_var_grad(grad, x, w, rm, rv, True, 1e-5), zero)


def test_pdist_square_and_condense_are_adjoint():
    x = torch.randn(5, 3, dtype=R)
    close(F.pdist_square(torch.pdist(x), 5), torch.cdist(x, x))
    t, m = torch.randn(10, dtype=R), torch.randn(5, 5, dtype=R)
    (expected,) = vjp(lambda v: F.pdist_square(v, 5), [t], m)
    close(F.pdist_condense(m), expected)


@pytest.mark.parametrize(
    "reduce, include_self",
    [
        ("mean", True),
        ("mean", False),
        ("prod", True),
        ("prod", False),
        ("amax", True),
        ("amin", True),
    ],
)
def test_index_reduce_helpers_match_autograd_and_differences(reduce, include_self):
    x, source = torch.randn(5, 3, dtype=R), torch.randn(4, 3, dtype=R)
    index = torch.tensor([0, 2, 2, 4])

    def fn(a, b):
        return a.index_reduce(0, index, b, reduce, include_self=include_self)

    result = fn(x, source)
    grad = torch.randn_like(result)
    got = F.index_reduce_grads(grad, x, 0, index, source, reduce, include_self, result)
    for g, e in zip(got, vjp(fn, [x, source], grad)):
        close(g, e)
    xt, st = torch.randn_like(x), torch.randn_like(source)
    h = 1e-6
    expected = (fn(x + h * xt, source + h * st) - fn(x - h * xt, source - h * st)) / (
        2 * h
    )
    tangent = F.index_reduce_tangent(
        xt, x, 0, index, st, source, reduce, include_self, result
    )
    close(tangent, expected, rtol=1e-6, atol=1e-8)


def test_dim_or_last():
    assert F.dim_or_last(None) == -1 and F.dim_or_last(2) == 2
