"""Tangents of random draws and of ops native forward AD has no rule for, each
against an oracle written out here.

- `torch._standard_gamma` (Gamma, Chi2, StudentT `rsample`): the draw's implicit
  reparameterization derivative in its shape, -(dP(a, x)/da) / p(x; a), with the
  regularized incomplete gamma P differenced in a (smooth and deterministic, so
  it shares nothing with the sampler or with `_standard_gamma_grad`).
- `torch.cholesky` (deprecated, no native rule): against `torch.linalg.cholesky`'s
  tangent under torch.func and central differences.
- `torch._masked_softmax` (the fused attention paths' softmax): against central
  differences and the softmax of the input with masked entries at -inf.
- `Tensor.index_reduce` (mean, prod with zeros, amax/amin with ties): against
  central differences, and ties against the share torch's backward gives them.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from devices import DEVICE

import dualgen.forward_ad as fwAD

F64 = {"dtype": torch.float64, "device": DEVICE}


def _jvp(f, x, t):
    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(x, t))).tangent


def test_gamma_draw_tangent_is_the_implicit_reparameterization(backend):
    alpha = torch.tensor([0.3, 0.9, 1.0, 2.5, 7.0, 30.0], **F64)
    t = torch.tensor([1.0, -0.5, 2.0, 0.25, -1.5, 0.7], **F64)

    def draw(a):
        torch.manual_seed(3)
        return torch._standard_gamma(a)

    tangent = _jvp(draw, alpha, t)
    x = draw(alpha)
    h = 1e-6
    dp_da = (
        torch.special.gammainc(alpha + h, x) - torch.special.gammainc(alpha - h, x)
    ) / (2 * h)
    density = torch.exp((alpha - 1) * x.log() - x - torch.lgamma(alpha))
    # to the accuracy of torch's approximation in _standard_gamma_grad (5e-5 here),
    # which autograd's gradient uses too
    torch.testing.assert_close(tangent, -dp_da / density * t, rtol=5e-4, atol=1e-8)


@pytest.mark.parametrize("dist", ["gamma", "chi2", "student_t"])
def test_distribution_rsample_tangents_equal_autograd(backend, dist):
    from torch.distributions import Chi2, Gamma, StudentT

    make = {
        "gamma": lambda a: Gamma(a, a.flip(0)),
        "chi2": Chi2,
        "student_t": StudentT,
    }[dist]
    alpha = torch.tensor([0.5, 1.5, 4.0], **F64)
    t = torch.tensor([0.3, -1.0, 2.0], **F64)

    def sample(a):
        torch.manual_seed(1)
        return make(a).rsample()

    jacobian = torch.autograd.functional.jacobian(sample, alpha)
    torch.testing.assert_close(_jvp(sample, alpha, t), jacobian @ t)


@pytest.mark.skipif(
    not hasattr(torch.ops.aten, "cholesky"), reason="torch 2.14 removed torch.cholesky"
)
@pytest.mark.parametrize("upper", [False, True])
def test_deprecated_cholesky_tangent(backend, upper):
    g = torch.Generator(DEVICE).manual_seed(0)
    a = torch.randn(2, 4, 4, generator=g, **F64)
    spd = a @ a.mT + 4 * torch.eye(4, **F64)
    t = torch.randn(2, 4, 4, generator=g, **F64)
    t = t + t.mT

    def f(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.cholesky is deprecated
            return torch.cholesky(m, upper=upper)

    tangent = _jvp(f, spd, t)
    _, expected = torch.func.jvp(
        lambda m: torch.linalg.cholesky(m, upper=upper), (spd,), (t,)
    )
    torch.testing.assert_close(tangent, expected)
    h = 1e-6
    torch.testing.assert_close(
        tangent, (f(spd + h * t) - f(spd - h * t)) / (2 * h), rtol=1e-6, atol=1e-8
    )


@pytest.mark.parametrize(
    "shape, mask_shape, dim, mask_type",
    [
        ((3, 5), (3, 5), None, None),
        ((2, 3, 5), (2, 3, 5), 2, 2),
        ((2, 2, 5, 5), (2, 5), 3, 1),
        ((2, 2, 5, 5), (5, 5), 3, 0),
    ],
    ids=["same-shape", "generic", "key-padding", "source-mask"],
)
def test_masked_softmax_tangent(backend, shape, mask_shape, dim, mask_type):
    g = torch.Generator(DEVICE).manual_seed(4)
    x = torch.randn(shape, generator=g, **F64)
    t = torch.randn(shape, generator=g, **F64)
    mask = torch.rand(mask_shape, generator=g, **F64) > 0.6
    mask[..., 0] = False  # no row masked whole

    def f(y):
        return torch._masked_softmax(y, mask, dim, mask_type)

    tangent = _jvp(f, x, t)
    h = 1e-6
    torch.testing.assert_close(
        tangent, (f(x + h * t) - f(x - h * t)) / (2 * h), rtol=1e-6, atol=1e-9
    )
    full = mask[:, None, None, :] if mask_type == 1 else mask
    _, expected = torch.func.jvp(
        lambda y: y.masked_fill(full.expand(shape), float("-inf")).softmax(-1),
        (x,),
        (t,),
    )
    torch.testing.assert_close(tangent, expected)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["mean", "prod", "amax", "amin"])
def test_index_reduce_tangent(backend, reduce, include_self):
    g = torch.Generator(DEVICE).manual_seed(6)
    index = torch.tensor([0, 2, 2, 4, 2], device=DEVICE)
    x = torch.randn(6, 3, generator=g, **F64)
    source = torch.randn(5, 3, generator=g, **F64)
    if reduce == "prod":
        source[1, 0] = 0.0  # place 2's only zero, column 0
        source[3, 1] = 0.0  # place 4's only source
    tx, ts = (
        torch.randn(6, 3, generator=g, **F64),
        torch.randn(5, 3, generator=g, **F64),
    )

    def f(a, b):
        return a.index_reduce(0, index, b, reduce, include_self=include_self)

    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, tx), fwAD.make_dual(source, ts))
        tangent = fwAD.unpack_dual(out).tangent
    h = 1e-6
    expected = (f(x + h * tx, source + h * ts) - f(x - h * tx, source - h * ts)) / (
        2 * h
    )
    torch.testing.assert_close(tangent, expected, rtol=1e-6, atol=1e-8)


def test_index_reduce_ties_share_as_torchs_backward(backend):
    """Where several elements attain the maximum, the tangent is their mean: the
    transpose of torch's backward, which shares the gradient evenly."""
    x = torch.tensor([[1.0], [3.0]], **F64)
    source = torch.tensor([[3.0], [3.0], [2.0]], **F64)
    index = torch.tensor([1, 1, 0], device=DEVICE)
    tx = torch.tensor([[0.5], [1.0]], **F64)
    ts = torch.tensor([[2.0], [4.0], [8.0]], **F64)
    with fwAD.dual_level():
        out = fwAD.make_dual(x, tx).index_reduce(
            0, index, fwAD.make_dual(source, ts), "amax"
        )
        tangent = fwAD.unpack_dual(out).tangent
    leaves = (x.clone().requires_grad_(), source.clone().requires_grad_())
    out = leaves[0].index_reduce(0, index, leaves[1], "amax")
    jacobian_t = [
        torch.autograd.grad(out[i, 0], leaves, retain_graph=True) for i in range(2)
    ]
    expected = torch.stack(
        [(gx * tx).sum() + (gs * ts).sum() for gx, gs in jacobian_t]
    ).reshape(2, 1)
    torch.testing.assert_close(tangent, expected)
    torch.testing.assert_close(
        tangent, torch.tensor([[8.0], [(1.0 + 2.0 + 4.0) / 3]], **F64)
    )
