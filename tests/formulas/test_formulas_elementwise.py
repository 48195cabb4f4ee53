"""The helpers of dualgen.formulas.elementwise (the general ones: scale, unbroadcast,
conform, ...; and those of element-wise ops) against a direct computation, torch
autograd or hand values; float64, and complex128 where the op supports it."""

from __future__ import annotations

import math

import pytest
import torch
from formula_checks import C, R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_scale_skips_one_and_scales_otherwise():
    t = torch.randn(3)
    assert F.scale(t, 1) is t
    torch.testing.assert_close(F.scale(t, 2.5), t * 2.5)


def test_scale_conj_conjugates_complex_factors():
    t = torch.randn(3, dtype=torch.complex128)
    assert F.scale_conj(t, 1) is t
    torch.testing.assert_close(F.scale_conj(t, 2 + 3j), t * (2 - 3j))
    torch.testing.assert_close(F.scale_conj(t, torch.tensor(1j)), t * -1j)


def test_unbroadcast_sums_to_shape_and_drops_imaginary_part_for_real_inputs():
    g = torch.randn(2, 3, 4, dtype=torch.complex128)
    like = torch.randn(3, 1)
    out = F.unbroadcast(g, like)
    torch.testing.assert_close(out, g.sum(0).sum(1, keepdim=True).real)
    assert F.unbroadcast(g, like.to(torch.complex128)).is_complex()


def test_copy_broadcast_copies_and_expands_only_when_needed():
    t = torch.randn(3, dtype=torch.float64)
    same = F.copy_broadcast(t, torch.empty(3))
    assert same._base is None and same.data_ptr() != t.data_ptr()
    torch.testing.assert_close(same, t)
    wide = F.copy_broadcast(t, torch.empty(2, 3))
    assert wide.shape == (2, 3) and wide.stride() == (0, 1)
    assert wide.data_ptr() != t.data_ptr()
    torch.testing.assert_close(wide, t.expand(2, 3))


def test_as_real_like():
    z = torch.randn(3, dtype=torch.complex128)
    torch.testing.assert_close(F.as_real_like(z, torch.randn(3)), z.real)
    assert F.as_real_like(z, z) is z


def test_conform_expands_to_the_result_and_keeps_the_tangent_dtype():
    result = torch.randn(3, 4)
    out = F.conform(torch.randn(4, dtype=torch.float64), result)
    assert out.shape == result.shape and out.dtype == torch.float64
    assert out.stride() == result.stride()
    same = torch.randn(3, 4)
    assert F.conform(same, result) is same
    z = torch.randn(3, 4, dtype=torch.complex128)
    torch.testing.assert_close(F.conform(z, result), z.real)
    # An output not computed (output_mask False) has no tangent.
    assert F.conform(torch.randn(3, 4), None) is None
    assert F.conform(None, result) is None


def test_fill_absent_builds_zeros_only_for_missing_tangents():
    a, b = torch.randn(2), torch.randn(3)
    out = F.fill_absent([a, None], [torch.randn(2), b])
    assert out[0] is a and torch.equal(out[1], torch.zeros(3))
    # No tangent list at all (a dense kernel branch): zeros for every tensor.
    zeros = F.fill_absent(None, [a, None, b])
    assert torch.equal(zeros[0], torch.zeros(2)) and zeros[1] is None
    assert torch.equal(zeros[2], torch.zeros(3))


def test_winner_weight_splits_ties():
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([2.0, 2.0, 1.0])
    assert torch.equal(F.winner_weight(a, b), torch.tensor([0.0, 0.5, 1.0]))


def test_pow_derivatives_match_autograd_including_zero_cases():
    x = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    e = torch.tensor([0.0, 2.0, 1.5], dtype=torch.float64, requires_grad=True)
    y = x.pow(e)
    gx, ge = torch.autograd.grad(y.sum(), (x, e))
    torch.testing.assert_close(F.pow_self_derivative(x.detach(), e.detach()), gx)
    torch.testing.assert_close(
        F.pow_exponent_derivative(x.detach(), e.detach(), y.detach()), ge
    )
    torch.testing.assert_close(
        F.pow_self_derivative(x.detach(), 0), torch.zeros(3, dtype=torch.float64)
    )


def test_clamp_mask_includes_bounds_and_handles_none():
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    assert F.clamp_mask(x, 0.0, 1.0).tolist() == [False, True, True, True, False]
    assert F.clamp_mask(x, None, 0.5).tolist() == [True, True, True, False, False]


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


def test_sgn_derivative_is_zero_for_real_inputs_even_at_nan():
    x = torch.tensor([-2.0, 0.0, math.nan, 3.0], dtype=R)
    v = torch.randn(4, dtype=R)
    out = F.sgn_derivative(v, x, x.sgn())
    assert torch.equal(out, torch.zeros(4, dtype=R))


def test_sgn_derivative_matches_autograd_for_complex_inputs():
    torch.manual_seed(0)
    z = torch.randn(5, dtype=C)
    z[2] = 0
    v = torch.randn(5, dtype=C)
    zz = z.clone().requires_grad_()
    (expected,) = torch.autograd.grad(zz.sgn(), zz, v)
    torch.testing.assert_close(F.sgn_derivative(v, z, z.sgn()), expected)
    jvp = torch.func.jvp(torch.sgn, (z,), (v,))[1]
    torch.testing.assert_close(F.sgn_derivative(v, z, z.sgn()), jvp)


def test_finite_parts_keeps_the_finite_part_of_a_complex_value():
    """nan_to_num replaces each part on its own: beside a NaN real part, the
    imaginary part moves with the input (finite differences), and a real tensor
    is masked where it is not finite."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([complex(nan, 0.5), complex(1.0, inf), complex(-inf, nan), 2 - 1j])
    t = torch.tensor([1 + 2j, 3 - 1j, 0.5 + 0.5j, -1 + 1j], dtype=torch.complex128)
    x = x.to(torch.complex128)
    h = 1e-6
    difference = (torch.nan_to_num(x + h * t) - torch.nan_to_num(x - h * t)) / (2 * h)
    close(F.finite_parts(t, x), difference)
    real = torch.tensor([nan, 1.0, inf, -2.0], dtype=torch.float64)
    close(
        F.finite_parts(torch.ones(4, dtype=torch.float64), real),
        real.isfinite().double(),
    )
