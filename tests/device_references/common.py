"""What the reference kernels share: the device kernels' dtype rules and their
empty outputs."""

from __future__ import annotations

import torch


def check_real_floating(name, t):
    """The device kernels take real floating dtypes only."""
    if not t.is_floating_point():
        raise RuntimeError(f"{name}: not implemented for '{t.dtype}'")


def lse_dtype(query):
    """logsumexp's dtype: float32, float64 for float64 inputs (which the devices
    do not take; gradcheck here does)."""
    return torch.float64 if query.dtype == torch.float64 else torch.float32


def empty(dtype=torch.int64):
    return torch.empty(0, dtype=dtype)
