"""Tangents on the arguments native forward AD takes as constants without a word:
the class and element weights of the losses (`binary_cross_entropy`'s and
`_with_logits`' weight and pos_weight, `nll_loss`'s and `multi_margin_loss`'s
class weights) and `soft_margin_loss`'s target. Native (torch 2.13) gives them a
zero share of the tangent, a wrong tangent with no error; dualgen differentiates
them. Checked against central differences in float64 on both kernel backends,
first derivatives (jvp) and through the backward ops (forward over reverse,
where autograd runs `nll_loss_backward`, `binary_cross_entropy_backward`,
`soft_margin_loss_backward` and `_pdist_backward`)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from devices import DEVICE

import dualgen.forward_ad as fwAD

F64 = {"dtype": torch.float64, "device": DEVICE}


def _inputs(seed):
    g = torch.Generator(DEVICE).manual_seed(seed)
    logits = torch.randn(6, 5, generator=g, **F64)
    probs = torch.rand(6, 5, generator=g, **F64) * 0.8 + 0.1
    target = torch.rand(6, 5, generator=g, **F64)
    labels = torch.tensor([0, 2, 4, 1, 2, 3], device=DEVICE)
    weight = torch.rand(5, generator=g, **F64) + 0.5
    return logits, probs, target, labels, weight


def _cases():
    logits, probs, target, labels, weight = _inputs(0)
    image_labels = torch.tensor([[[0, 1], [2, 0]], [[1, 1], [0, 2]]], device=DEVICE)
    images = logits.flatten()[:24].reshape(2, 3, 2, 2)
    return {
        "bce_weight": (
            lambda w: F.binary_cross_entropy(probs, target, weight=w),
            weight,
        ),
        "bce_weight_none": (
            lambda w: F.binary_cross_entropy(probs, target, weight=w, reduction="none"),
            torch.rand(6, 5, **F64) + 0.5,
        ),
        "bce_logits_weight": (
            lambda w: F.binary_cross_entropy_with_logits(
                logits, target, weight=w, pos_weight=weight
            ),
            weight.flip(0),
        ),
        "bce_logits_pos_weight": (
            lambda pw: F.binary_cross_entropy_with_logits(
                logits, target, weight=weight, pos_weight=pw, reduction="sum"
            ),
            weight.flip(0),
        ),
        "nll_weight_mean": (
            lambda w: F.nll_loss(logits.log_softmax(-1), labels, weight=w),
            weight,
        ),
        "nll_weight_mean_ignored": (
            lambda w: F.nll_loss(
                logits.log_softmax(-1), labels, weight=w, ignore_index=2
            ),
            weight,
        ),
        "nll_weight_sum": (
            lambda w: F.nll_loss(logits, labels, weight=w, reduction="sum"),
            weight,
        ),
        "nll_weight_none": (
            lambda w: F.nll_loss(logits, labels, weight=w, reduction="none"),
            weight,
        ),
        "cross_entropy_weight": (
            lambda w: F.cross_entropy(logits, labels, weight=w),
            weight,
        ),
        "nll2d_weight": (
            lambda w: F.nll_loss(images, image_labels, weight=w),
            weight[:3],
        ),
        "multi_margin_weight": (
            lambda w: F.multi_margin_loss(logits, labels, p=2, weight=w),
            weight,
        ),
        "soft_margin_target": (
            lambda y: F.soft_margin_loss(logits, y),
            target - 0.5,
        ),
    }


CASES = _cases()


def _jvp(f, x, v):
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, v))
        return fwAD.unpack_dual(out).tangent


def _difference(f, x, v, eps=1e-6):
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


@pytest.mark.parametrize("name", CASES)
def test_tangent_equals_central_differences(backend, name):
    f, x = CASES[name]
    v = torch.randn(x.shape, generator=torch.Generator(DEVICE).manual_seed(3), **F64)
    tangent = _jvp(f, x, v)
    expected = _difference(f, x, v)
    assert expected.abs().max() > 1e-3  # the share native drops is not zero
    torch.testing.assert_close(tangent, expected, rtol=1e-6, atol=1e-8)


def _gradient(f, x, w):
    leaf = x.detach().requires_grad_()
    out = f(leaf, w)
    return torch.autograd.grad(out, leaf, torch.ones_like(out))[0]


def _second_order_cases():
    """(f(x, w), w): x the logits, which autograd differentiates; w a weight or
    target, which torch's autograd refuses to (it raises), carrying a tangent only."""
    _, _, target, labels, weight = _inputs(1)
    return {
        "nll_weight_mean": (
            lambda x, w: F.nll_loss(x.log_softmax(-1), labels, weight=w),
            weight,
        ),
        "nll_weight_ignored": (
            lambda x, w: F.nll_loss(x.sin(), labels, weight=w, ignore_index=4),
            weight,
        ),
        "nll_weight_sum": (
            lambda x, w: F.nll_loss(x.sin(), labels, weight=w, reduction="sum"),
            weight,
        ),
        "nll_weight_none": (
            lambda x, w: F.nll_loss(x.sin(), labels, weight=w, reduction="none")
            .pow(2)
            .sum(),
            weight,
        ),
        "bce_weight": (
            lambda x, w: F.binary_cross_entropy(x.sigmoid(), target, weight=w),
            weight,
        ),
        "soft_margin": (lambda x, y: F.soft_margin_loss(x, y), target - 0.5),
        "soft_margin_none": (
            lambda x, y: F.soft_margin_loss(x.sin(), y, reduction="none").pow(2).sum(),
            target - 0.5,
        ),
        "pdist": (lambda x, w: torch.pdist(x * w, p=2).pow(3).sum(), weight),
        "pdist_p3": (lambda x, w: torch.pdist(x * w, p=3).sin().sum(), weight),
        "pdist_p1": (lambda x, w: torch.pdist(x * w, p=1).pow(2).sum(), weight),
    }


SECOND_ORDER = _second_order_cases()


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_forward_over_reverse_equals_differences_of_the_gradient(backend, name):
    """The tangent of the gradient (tangents on the logits and on the weight or
    target) through the backward ops. torch.func raises for pdist and soft margin
    (no forward rule for `_pdist_forward` / `soft_margin_loss_backward`), and drops
    the weight's share in nll and bce."""
    f, w = SECOND_ORDER[name]
    g = torch.Generator(DEVICE).manual_seed(5)
    x = torch.randn(6, 5, generator=g, **F64)
    v = torch.randn(6, 5, generator=g, **F64)
    vw = torch.randn(w.shape, generator=g, **F64)
    leaf = x.clone().requires_grad_()
    with fwAD.dual_level():
        out = f(fwAD.make_dual(leaf, v), fwAD.make_dual(w, vw))
        (grad,) = torch.autograd.grad(out, leaf)
        tangent = fwAD.unpack_dual(grad).tangent
    eps = 1e-6
    plus = _gradient(f, x + eps * v, w + eps * vw)
    minus = _gradient(f, x - eps * v, w - eps * vw)
    torch.testing.assert_close(
        tangent, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7
    )


def test_histc_of_a_dual_has_no_tangent(backend):
    """Counts are piecewise constant in the values: no tangent, as in native
    (dualgen raised for want of a rule)."""
    x = torch.randn(10, **F64)
    with fwAD.dual_level():
        counts = torch.histc(
            fwAD.make_dual(x, torch.ones_like(x)), bins=4, min=-2, max=2
        )
        assert fwAD.unpack_dual(counts).tangent is None
    torch.testing.assert_close(counts, torch.histc(x, bins=4, min=-2, max=2))


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 2)])
def test_eval_batch_norm_running_statistics_tangents(backend, affine, shape):
    """In eval mode a batch norm reads its running statistics; native drops their
    tangents without a word. Through nn.BatchNorm (the `_batch_norm_no_update` /
    `native_batch_norm` path) with tangents on the buffers as
    `torch.func.functional_call` gives them, against central differences."""
    g = torch.Generator(DEVICE).manual_seed(7)
    norm = {2: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(shape)]
    module = norm(3, affine=affine).to(**F64).eval()
    x = torch.randn(shape, generator=g, **F64)
    mean = torch.randn(3, generator=g, **F64)
    var = torch.rand(3, generator=g, **F64) + 0.5
    v_mean, v_var = (torch.randn(3, generator=g, **F64) for _ in range(2))

    def f(mean, var):
        buffers = {"running_mean": mean, "running_var": var}
        return torch.func.functional_call(module, buffers, (x,))

    with fwAD.dual_level():
        out = f(fwAD.make_dual(mean, v_mean), fwAD.make_dual(var, v_var))
        tangent = fwAD.unpack_dual(out).tangent
    eps = 1e-6
    expected = (
        f(mean + eps * v_mean, var + eps * v_var)
        - f(mean - eps * v_mean, var - eps * v_var)
    ) / (2 * eps)
    torch.testing.assert_close(tangent, expected, rtol=1e-6, atol=1e-8)


def test_train_batch_norm_output_does_not_read_running_statistics(backend):
    """In training the output reads the batch's statistics only: the running ones'
    tangents give it no share."""
    module = torch.nn.BatchNorm1d(3).to(**F64).train()
    x = torch.randn(4, 3, **F64)
    with fwAD.dual_level():
        buffers = {
            "running_mean": fwAD.make_dual(torch.zeros(3, **F64), torch.ones(3, **F64)),
            "running_var": fwAD.make_dual(torch.ones(3, **F64), torch.ones(3, **F64)),
        }
        out = torch.func.functional_call(
            module, buffers, (fwAD.make_dual(x, torch.zeros_like(x)),)
        )
        tangent = fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(tangent, torch.zeros_like(x))
