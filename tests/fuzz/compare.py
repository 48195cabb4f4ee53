"""When two tensors count as equal, and how a difference is described.

Tolerances are absolute, scaled by the largest magnitude involved (at least 1):
values are O(1) by construction, and a relative test would be noise around zeros.
Two AD engines evaluate the same formulas up to rounding (tight), finite
differences carry truncation error (looser); float32 anywhere loosens both.
An absent tangent is a zero tangent for values; presence is compared apart.
"""

from __future__ import annotations

import torch

# Half-precision tangents (make_dual of a float64 primal with a bfloat16 or float16
# tangent) round each formula at 2^-8 or 2^-11 relative.
AD_TOLERANCE = {
    torch.float64: 1e-9,
    torch.float32: 1e-4,
    torch.float16: 8e-3,
    torch.bfloat16: 6e-2,
}
FD_TOLERANCE = {
    torch.float64: 1e-5,
    torch.float32: 2e-3,
    torch.float16: 1e-2,
    torch.bfloat16: 8e-2,
}
FD_EPS = 1e-6


def _real_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


def tolerance(table: dict[torch.dtype, float], *dtypes: torch.dtype | None) -> float:
    """The loosest tolerance among `dtypes` (the least precise one decides)."""
    return max(table[_real_dtype(d)] for d in dtypes if d is not None)


def as_wide(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """t in complex128 (float64 if real), zeros of like's shape when None."""
    if t is None:
        t = torch.zeros(like.shape, dtype=like.dtype)
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b|, NaN against NaN counting as equal, NaN against a number as inf."""
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    both_nan = a.isnan() & b.isnan()
    diff = (a - b).abs()
    diff = torch.where(both_nan, torch.zeros_like(diff), diff)
    return float(diff.nan_to_num(nan=float("inf")).max())


def scale(*tensors: torch.Tensor) -> float:
    """max(1, largest finite magnitude among `tensors`)."""
    out = 1.0
    for t in tensors:
        if t.numel():
            finite = t.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
            out = max(out, float(finite.max()))
    return out


def close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    """Same shape, and |a - b| <= tol * scale elementwise."""
    a = a.to(torch.complex128 if a.is_complex() else torch.float64)
    b = b.to(torch.complex128 if b.is_complex() else torch.float64)
    if a.is_complex() != b.is_complex():
        a, b = a.to(torch.complex128), b.to(torch.complex128)
    return max_difference(a, b) <= tol * scale(a, b)


def is_zero(t: torch.Tensor | None) -> bool:
    return t is None or not bool((t != 0).any())


def describe(t: torch.Tensor | None) -> str:
    """A short text of a tensor for reports: dtype, shape and (small) values."""
    if t is None:
        return "None"
    values = t.flatten()[:6].tolist()
    more = ", ..." if t.numel() > 6 else ""
    shown = ", ".join(
        f"{v:.6g}" if not isinstance(v, complex) else f"{v:.4g}" for v in values
    )
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)} [{shown}{more}]"
