"""The helpers of dualgen.formulas.quantization (learnable per-tensor and
per-channel fake quantization, quantization-aware training): the gradients
equal native autograd's straight-through ones (native runs in float32 only), the
tangents are their transposes (float32 and float64), and float64 agrees with
float32 on the same values."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close

from dualgen import formulas as F

aten = torch.ops.aten
F32 = torch.float32
RANGES = [(0, 255), (-128, 127), (-8, 7)]  # native wants quant_min <= 0 <= quant_max


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def per_tensor_args(quant_min, dtype=F32):
    x = torch.randn(5, 4, 3, dtype=dtype) * 2
    s = torch.rand(1, dtype=dtype) * 0.1 + 0.01
    # non-integer zero points: native rounds them (per tensor: trunc(z + 0.5))
    z = torch.rand(1, dtype=dtype) * 10 - (0 if quant_min == 0 else 5)
    return x, s, z


def per_channel_args(quant_min, axis, dtype=F32):
    x = torch.randn(5, 4, 3, dtype=dtype) * 2
    c = x.shape[axis]
    s = torch.rand(c, dtype=dtype) * 0.1 + 0.01
    z = torch.rand(c, dtype=dtype) * 10 - (0 if quant_min == 0 else 5)
    return x, s, z


def native_grads(op, args, extra, v):
    leaves = [a.clone().requires_grad_() for a in args]
    out = op(*leaves, *extra)
    return torch.autograd.grad(out, leaves, v)


def assert_grads_are_autograds(op, grads, args, extra):
    """grads(v, *args, *extra), for a random v, are native op's autograd ones."""
    v = torch.randn_like(args[0])
    expected = native_grads(op, args, extra, v)
    for g, e in zip(grads(v, *args, *extra), expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        close(g, e, rtol=1e-5, atol=1e-5)


def adjoint_gap(tangent, grads, args, extra):
    """|<v, J u> - <J^T v, u>| relative, for random v and u."""
    x = args[0]
    v = torch.randn_like(x)
    u = [torch.randn_like(a) for a in args]
    forward = (v * tangent(*u, *args, *extra)).sum()
    backward = sum((g * t).sum() for g, t in zip(grads(v, *args, *extra), u))
    return (forward - backward).abs() / (forward.abs() + backward.abs() + 1)


@pytest.mark.parametrize("grad_factor", [1.0, 0.3])
@pytest.mark.parametrize("quant_range", RANGES)
def test_per_tensor_grads_are_autograds(quant_range, grad_factor):
    for _ in range(5):
        args = per_tensor_args(quant_range[0])
        extra = (*quant_range, grad_factor)
        assert_grads_are_autograds(
            aten._fake_quantize_learnable_per_tensor_affine,
            F.fake_quantize_learnable_per_tensor_grads,
            args,
            extra,
        )


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("grad_factor", [1.0, 0.3])
@pytest.mark.parametrize("quant_range", RANGES)
def test_per_channel_grads_are_autograds(quant_range, grad_factor, axis):
    for _ in range(5):
        args = per_channel_args(quant_range[0], axis)
        extra = (axis, *quant_range, grad_factor)
        assert_grads_are_autograds(
            aten._fake_quantize_learnable_per_channel_affine,
            F.fake_quantize_learnable_per_channel_grads,
            args,
            extra,
        )


@pytest.mark.parametrize("dtype", [F32, R])
@pytest.mark.parametrize("quant_range", RANGES)
def test_per_tensor_tangent_is_the_transpose_of_the_grads(quant_range, dtype):
    tol = 1e-5 if dtype == F32 else 1e-12
    for grad_factor in [1.0, 0.3]:
        args = per_tensor_args(quant_range[0], dtype)
        gap = adjoint_gap(
            F.fake_quantize_learnable_per_tensor_tangent,
            F.fake_quantize_learnable_per_tensor_grads,
            args,
            (*quant_range, grad_factor),
        )
        assert gap < tol


@pytest.mark.parametrize("dtype", [F32, R])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("quant_range", RANGES)
def test_per_channel_tangent_is_the_transpose_of_the_grads(quant_range, axis, dtype):
    tol = 1e-5 if dtype == F32 else 1e-12
    for grad_factor in [1.0, 0.3]:
        args = per_channel_args(quant_range[0], axis, dtype)
        gap = adjoint_gap(
            F.fake_quantize_learnable_per_channel_tangent,
            F.fake_quantize_learnable_per_channel_grads,
            args,
            (axis, *quant_range, grad_factor),
        )
        assert gap < tol


def test_float64_agrees_with_native_float32():
    """Native's backward refuses float64; the helpers' float64 gradients are its
    float32 ones up to float32 rounding (same mask, same branches)."""
    args = per_tensor_args(-128)
    extra = (-128, 127, 1.0)
    v = torch.randn_like(args[0])
    expected = native_grads(
        aten._fake_quantize_learnable_per_tensor_affine, args, extra, v
    )
    got = F.fake_quantize_learnable_per_tensor_grads(
        v.double(), *(a.double() for a in args), *extra
    )
    for g, e in zip(got, expected):
        assert g.dtype == R
        close(g, e.double(), rtol=1e-4, atol=1e-4)


def test_straight_through_values():
    """Inside the range d/dx = 1, d/ds = (fq(x) - x) / s, d/dz = 0; below it
    d/dx = 0, d/ds = qmin - z, d/dz = -s; above it qmax - z and -s."""
    x = torch.tensor([0.26, -5.0, 5.0], dtype=R)
    s, z = torch.tensor([0.1], dtype=R), torch.tensor([2.2], dtype=R)  # z -> 2
    ones = torch.ones(1, dtype=R)
    zeros = torch.zeros(1, dtype=R)
    tangent = F.fake_quantize_learnable_per_tensor_tangent
    dx = tangent(torch.ones_like(x), zeros, zeros, x, s, z, 0, 15, 1.0)
    ds = tangent(torch.zeros_like(x), ones, zeros, x, s, z, 0, 15, 1.0)
    dz = tangent(torch.zeros_like(x), zeros, ones, x, s, z, 0, 15, 0.5)
    close(dx, torch.tensor([1.0, 0.0, 0.0], dtype=R))
    close(ds, torch.tensor([(0.3 - 0.26) / 0.1, 0.0 - 2, 15.0 - 2], dtype=R))
    close(dz, torch.tensor([0.0, -0.05, -0.05], dtype=R))


def test_empty_and_zero_dim():
    for x in [torch.randn(()), torch.randn(0, 3)]:
        s, z = torch.tensor([0.1]), torch.tensor([1.0])
        t = F.fake_quantize_learnable_per_tensor_tangent(
            torch.ones_like(x), torch.ones(1), torch.ones(1), x, s, z, 0, 15, 1.0
        )
        assert t.shape == x.shape
        grads = F.fake_quantize_learnable_per_tensor_grads(
            torch.ones_like(x), x, s, z, 0, 15, 1.0
        )
        assert [g.shape for g in grads] == [x.shape, s.shape, z.shape]
