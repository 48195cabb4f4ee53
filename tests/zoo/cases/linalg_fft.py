"""Zoo cases: torch.linalg and torch.fft."""

from __future__ import annotations

import torch

from .common import case

# ---------------------------------------------------------------- linalg


@case("linalg")
def linalg_solve(c):
    a = c.randn(2, 3, 3) + 3 * torch.eye(3, dtype=c.dtype)
    return torch.linalg.solve, (a, c.randn(2, 3, 2))


@case("linalg")
def linalg_inv(c):
    return torch.linalg.inv, (c.randn(2, 3, 3) + 3 * torch.eye(3, dtype=c.dtype),)


@case("linalg")
def linalg_det(c):
    return torch.linalg.det, (c.randn(2, 3, 3),)


@case("linalg")
def linalg_slogdet(c):
    return torch.linalg.slogdet, (c.randn(2, 3, 3),)


@case("linalg")
def linalg_cholesky(c):
    return (lambda a: torch.linalg.cholesky((a + a.mT) / 2)), (c.spd(2, n=3),)


@case("linalg")
def linalg_qr(c):
    return torch.linalg.qr, (c.randn(2, 4, 3),)


@case("linalg")
def linalg_eigh(c):
    def f(a):
        a = (a + a.mT) / 2
        w, v = torch.linalg.eigh(a)
        return w, v * v  # sign-invariant

    return f, (c.randn(2, 3, 3),)


@case("linalg")
def linalg_eigvalsh(c):
    return (lambda a: torch.linalg.eigvalsh((a + a.mT) / 2)), (c.spd(2, n=3),)


@case("linalg")
def linalg_svd(c):
    def f(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        return s, u @ torch.diag_embed(s) @ vh, u * u

    return f, (c.randn(2, 4, 3),)


@case("linalg")
def linalg_svdvals(c):
    return torch.linalg.svdvals, (c.randn(2, 4, 3),)


@case("linalg")
def linalg_lstsq(c):
    return (lambda a, b: torch.linalg.lstsq(a, b).solution), (
        c.randn(2, 5, 3),
        c.randn(2, 5, 2),
    )


@case("linalg")
def linalg_norms(c):
    def f(a):
        return (
            torch.linalg.norm(a),
            torch.linalg.vector_norm(a, ord=3, dim=-1),
            torch.linalg.matrix_norm(a),
            torch.linalg.matrix_norm(a, ord="nuc"),
            torch.linalg.matrix_norm(a, ord=2),
            torch.linalg.matrix_norm(a, ord=1),
        )

    return f, (c.randn(2, 4, 3),)


@case("linalg")
def linalg_pinv_matrix_power_exp(c):
    def f(a):
        return (
            torch.linalg.pinv(a),
            torch.linalg.matrix_power(a[..., :3, :], 3),
            torch.linalg.matrix_exp(a[..., :3, :] / 3),
        )

    return f, (c.randn(2, 4, 3),)


@case("linalg")
def linalg_eigvals(c):
    a = c.randn(3, 3)
    a = a @ a.mT + torch.diag(
        torch.arange(1.0, 4.0, dtype=torch.float64).to(c.dtype)
    )  # real spectrum
    return (lambda a: torch.linalg.eigvals(a).real.sort(dim=-1)[0]), (a,)


@case("linalg")
def linalg_cholesky_solve_triangular(c):
    def f(a, b):
        l = torch.linalg.cholesky((a + a.mT) / 2)
        return torch.cholesky_solve(b, l), torch.linalg.solve_triangular(
            l, b, upper=False
        )

    return f, (c.spd(2, n=3), c.randn(2, 3, 2))


@case("linalg")
def linalg_lu_factor_solve(c):
    def f(a, b):
        lu, piv = torch.linalg.lu_factor(a)
        return torch.linalg.lu_solve(lu, piv, b)

    return f, (c.randn(2, 3, 3) + 3 * torch.eye(3, dtype=c.dtype), c.randn(2, 3, 2))


@case("linalg")
def linalg_cross_vecdot_multi_dot(c):
    def f(a, b, m):
        return (
            torch.linalg.cross(a, b),
            torch.linalg.vecdot(a, b),
            torch.linalg.multi_dot([m, m.mT, m]),
        )

    return f, (c.randn(4, 3), c.randn(4, 3), c.randn(3, 4))


# ---------------------------------------------------------------- fft


@case("fft")
def fft_fft(c):
    return (lambda x: torch.view_as_real(torch.fft.fft(x))), (c.randn(3, 8),)


@case("fft")
def fft_rfft(c):
    return (lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho"))), (
        c.randn(3, 8),
    )


@case("fft")
def fft_irfft(c):
    def f(re, im):
        return torch.fft.irfft(torch.complex(re, im), n=8)

    return f, (c.randn(3, 5), c.randn(3, 5))


@case("fft")
def fft_fft2_ifft2(c):
    return (
        lambda x: torch.view_as_real(torch.fft.ifft2(torch.fft.fft2(x) * x.mean()))
    ), (
        c.randn(2, 4, 6),
    )


@case("fft")
def fft_fftn_rfftn_irfftn(c):
    def f(x):
        return torch.view_as_real(torch.fft.fftn(x)), torch.fft.irfftn(
            torch.fft.rfftn(x) * 2, s=x.shape[-3:]
        )

    return f, (c.randn(2, 3, 4, 4),)


@case("fft")
def fft_hfft_fftshift(c):
    def f(x):
        return torch.fft.hfft(torch.complex(x, x.flip(-1))), torch.fft.fftshift(x)

    return f, (c.randn(3, 5),)


@case("fft")
def stft_istft(c):
    win = torch.hann_window(8, dtype=c.dtype)

    def f(x):
        s = torch.stft(x, 8, hop_length=2, window=win, return_complex=True)
        return torch.view_as_real(s), torch.istft(
            s, 8, hop_length=2, window=win, length=x.shape[-1]
        )

    return f, (c.randn(2, 32),)
