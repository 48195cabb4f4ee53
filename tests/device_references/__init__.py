"""Reference CPU kernels for device-only aten ops, for the tests only (never in the
package): each computes, from math ops, what its device kernel computes, outputs
and their layouts included, so dualgen's generated rules for those ops run and are
proved on a machine without the device.

`register()` adds them as the ops' CPU kernels (torch has none); the test session
calls it (tests/conftest.py), and `dualgen validate --import tests.device_references`
does on import.

One module per family: `attention` (the kernels scaled_dot_product_attention
dispatches to on CUDA and their backward kernels), `attention_lower` (the lower
kernels libraries call directly, and their backward kernels), `recurrent` (the CUDA
RNN cells and cuDNN's RNN stack), `nn` (cuDNN's and MIOpen's batch norm,
max_pool2d_backward, MPS's transposed convolution).
Dropout draws its mask from the global generator (the device kernels draw theirs
inside, from a state of their own); dualgen's rules refuse dropout_p > 0.
"""

from __future__ import annotations

import torch

from . import attention, attention_lower, nn, recurrent
from .attention import attention_backward
from .attention_lower import (
    efficient_forward,
    efficient_lower_backward,
    flash_forward,
    flash_lower_backward,
)

__all__ = [
    "KERNELS",
    "attention_backward",
    "efficient_forward",
    "efficient_lower_backward",
    "flash_forward",
    "flash_lower_backward",
]

KERNELS = {
    **attention.KERNELS,
    **attention_lower.KERNELS,
    **recurrent.KERNELS,
    **nn.KERNELS,
}
_LIBRARY = None


def register() -> None:
    """Add the references as the ops' CPU kernels (once; only where torch has
    none, so a build with its own kernels keeps them)."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = torch.library.Library("aten", "IMPL")
    for name, kernel in KERNELS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CPU"):
            _LIBRARY.impl(name, kernel, "CPU")


register()
