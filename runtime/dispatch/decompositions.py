"""Whether torch implements an op in other aten ops, which the mode and the hot
path both ask. A leaf."""

from __future__ import annotations

import torch


def has_decomposition(func) -> bool:
    """True for ops torch implements in other aten ops (CompositeImplicitAutograd)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    )
