"""Helpers of dualgen.formulas added alongside fixes to existing entries, each
against torch's own derivatives or hand values."""

from __future__ import annotations

import math

import torch

from dualgen import formulas as F

R, C = torch.float64, torch.complex128


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
