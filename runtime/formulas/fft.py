"""Helpers for FFT ops: the gradients of `_fft_r2c` (real signal -> complex
spectrum) and `_fft_c2r` (half spectrum -> real signal).
"""

from __future__ import annotations

import torch

__all__ = [
    "fft_c2r_grad",
    "fft_r2c_grad",
]


def fft_r2c_grad(grad, self, dim, normalization: int, onesided: bool):
    """Gradient of `_fft_r2c` (real signal -> complex spectrum) at real `self`.

    The op is the DFT over `dim` (scaled by `normalization`), keeping only the
    first n // 2 + 1 bins of dim[-1] when `onesided`. Its adjoint zero-pads the
    spectrum's gradient back to n bins along dim[-1] (the dropped bins have no
    gradient), applies the adjoint DFT (an inverse c2c with the same
    normalization), and keeps the real part (the input is real)."""
    if onesided:
        last = dim[-1] % grad.dim()
        missing = self.shape[last] - grad.shape[last]
        if missing > 0:
            shape = list(grad.shape)
            shape[last] = missing
            grad = torch.cat([grad, grad.new_zeros(shape)], last)
    return torch.ops.aten._fft_c2c(grad, dim, normalization, False).real


def fft_c2r_grad(grad, dim, normalization: int):
    """Gradient of `_fft_c2r` (Hermitian half spectrum -> real signal of n
    samples, n = grad.shape[dim[-1]]) at its complex input.

    c2r reads its input h as the half spectrum of a Hermitian-symmetric one: each
    bin k of 0 < k < n / 2 stands for itself and for the mirrored bin n - k
    (conj h[k]), while the DC bin and, for even n, the Nyquist bin stand alone
    (c2r ignores their imaginary parts). So the output is Re(A h), A the inverse
    DFT with those interior columns doubled, and the gradient is A^H grad: the
    onesided forward DFT (r2c, same normalization) of `grad`, with the interior
    bins doubled. The DC/Nyquist gradients come out real, as they should."""
    spectrum = torch.ops.aten._fft_r2c(grad, dim, normalization, True)
    last = dim[-1] % grad.dim()
    n, half = grad.shape[last], spectrum.shape[last]
    weight = torch.ones(half, dtype=grad.dtype, device=grad.device)
    weight[1 : 1 + n - half] = 2  # bins 1 .. (n - 1) // 2
    return spectrum * weight.reshape([half] + [1] * (grad.dim() - 1 - last))
