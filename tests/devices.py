"""The device the suite runs on: DUALGEN_TEST_DEVICE (`make test DEVICE=cuda`), the
CPU by default.

tests/conftest.py makes it torch's default device for the session where it is not
the CPU, so the tensors tests make with torch.randn, zeros, ... land on it. What
draws from a generator of its own takes one on the device (`torch.Generator(DEVICE)`:
on the CPU, the generator tests always had, so the same numbers), or draws on the
CPU and moves the values (the spec's samples and the kernel tests' tangents: the
same values on every device).
"""

from __future__ import annotations

import contextlib
import os

import torch


def _named(name: str) -> torch.device:
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise RuntimeError(
            f"DUALGEN_TEST_DEVICE={name!r} names no torch device: {exc}"
        ) from None


DEVICE = _named(os.environ.get("DUALGEN_TEST_DEVICE") or "cpu")


def unavailable(device: torch.device) -> str | None:
    """Why torch cannot run tensors on `device` here (None: it can)."""
    if device.type in ("cpu", "meta"):
        return None
    module = getattr(torch, device.type, None)
    is_available = getattr(module, "is_available", None)
    if is_available is None:
        return f"torch has no device module {device.type!r}"
    if not is_available():
        return f"torch.{device.type}.is_available() is False"
    count = getattr(module, "device_count", lambda: 1)()
    if device.index is not None and device.index >= count:
        return f"{device} does not exist ({count} {device.type} device(s))"
    return None


def fork_rng() -> contextlib.AbstractContextManager:
    """torch.random.fork_rng over the CPU's generator and, off the CPU, the
    device's: random ops run inside leave both streams as they were."""
    if DEVICE.type in ("cpu", "meta"):
        return torch.random.fork_rng(devices=[])
    module = getattr(torch, DEVICE.type)
    index = DEVICE.index if DEVICE.index is not None else module.current_device()
    return torch.random.fork_rng(devices=[index], device_type=DEVICE.type)
