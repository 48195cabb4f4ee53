"""The fft helpers of dualgen.formulas (gradients of _fft_r2c and _fft_c2r), against
torch.autograd.grad of the native ops and against the adjoint of the real-linear
map each op is, built column by column from the op itself (no autograd)."""

from __future__ import annotations

import pytest
import torch

from dualgen import formulas as F

R, C = torch.float64, torch.complex128
aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **kw)


def vjp(fn, x, grad):
    x = x.detach().clone().requires_grad_()
    return torch.autograd.grad(fn(x), x, grad)[0]


def real_adjoint(fn, x, grad):
    """The gradient of <fn(x), grad> (real inner product) for a real-linear fn, in
    PyTorch's convention (d/d Re x + i d/d Im x), from fn applied to unit inputs."""
    units = [1.0] if not x.is_complex() else [1.0, 1j]
    out = torch.zeros_like(x).reshape(-1)
    for k in range(x.numel()):
        for u in units:
            e = torch.zeros_like(x).reshape(-1)
            e[k] = u
            y = fn(e.reshape(x.shape))
            out[k] += u * (y.conj() * grad).real.sum()
    return out.reshape(x.shape)


def assert_is_adjoint(op, x, args, grad):
    """grad(g), for a random cotangent g of op(x, *args), has the dtype and shape
    of x and is the gradient autograd gives, and the one from unit inputs."""

    def fn(a):
        return op(a, *args)

    g = torch.randn_like(fn(x))
    got = grad(g)
    assert got.dtype == x.dtype and got.shape == x.shape
    close(got, vjp(fn, x, g))
    close(got, real_adjoint(fn, x, g))


# (shape, dim, onesided)
R2C_CASES = [
    ((3, 6), [1], True),
    ((3, 5), [1], True),
    ((3, 5), [0, 1], False),
    ((2, 3, 5), [0, 2], True),
    ((4, 3, 2), [1, 0], True),
    ((3, 4), [1], False),
    ((2, 1), [1], True),
]


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("shape, dim, onesided", R2C_CASES)
def test_fft_r2c_grad_is_the_adjoint_of_r2c(shape, dim, onesided, normalization):
    x = torch.randn(shape, dtype=R)
    args = (dim, normalization, onesided)
    assert_is_adjoint(aten._fft_r2c, x, args, lambda g: F.fft_r2c_grad(g, x, *args))


# (input shape, dim, last_dim_size): the input holds last_dim_size // 2 + 1 bins
C2R_CASES = [
    ((3, 4), [1], 6),
    ((3, 4), [1], 7),
    ((2, 4, 3), [0, 2], 4),
    ((3, 4), [1, 0], 5),
    ((3, 2), [1], 2),
    ((3, 2), [1], 3),
    ((3, 1), [1], 1),
]


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("shape, dim, n", C2R_CASES)
def test_fft_c2r_grad_is_the_adjoint_of_c2r(shape, dim, n, normalization):
    x = torch.randn(shape, dtype=C)
    args = (dim, normalization, n)
    assert_is_adjoint(
        aten._fft_c2r, x, args, lambda g: F.fft_c2r_grad(g, dim, normalization)
    )


def test_fft_c2r_grad_of_dc_and_nyquist_bins_is_real():
    # c2r ignores the imaginary parts of the DC and (even n) Nyquist bins.
    g = torch.randn(3, 8, dtype=R)
    got = F.fft_c2r_grad(g, [1], 0)
    assert got.shape == (3, 5)
    close(got[:, [0, 4]].imag, torch.zeros(3, 2, dtype=R))
    # interior bins count twice: each also stands for its mirrored bin
    close(got[:, 1:4], 2 * torch.fft.rfft(g, dim=1)[:, 1:4])
