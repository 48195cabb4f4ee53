"""Forward AD across processes: what goes beyond torch.distributed's own API.

Collectives of duals need nothing from here: inside a dual level they carry
tangents by themselves (docs/distributed.md). This module lays duals out so
that collectives carry them with no copies.
"""

from __future__ import annotations

import torch

from .dual_checks import check_dual
from .levels import current_level, set_tangent

__all__ = ["make_packed_dual"]


def make_packed_dual(
    tensor: torch.Tensor, tangent: torch.Tensor, *, level: int | None = None
) -> torch.Tensor:
    """A dual like `forward_ad.make_dual(tensor, tangent)`, its value and tangent
    copied side by side into one new buffer (value first). An element-wise
    collective of it (`all_reduce` SUM/AVG/PREMUL_SUM, `broadcast`, `reduce`,
    `send`/`recv`) sends that buffer as it lies, in place, instead of packing
    the two into a message and copying them back out: at large sizes it costs
    what a plain collective of the same bytes costs.

    For a buffer that lives across many collectives (an accumulator, a bucket
    of gradient estimates): copy results into it with `copy_`, which keeps
    the layout. Unlike make_dual's, the result is a new tensor, not a view of
    `tensor`; a plain tensor only (a DTensor's collectives are DTensor's)."""
    lvl = current_level(level)
    check_dual(tensor, tangent, lvl)
    if type(tensor) is not torch.Tensor or type(tangent) is not torch.Tensor:
        raise TypeError(
            "make_packed_dual takes plain tensors (a DTensor's collectives are "
            f"DTensor's), not {type(tensor).__name__} and {type(tangent).__name__}"
        )
    n = tensor.numel()
    memory = tensor.new_empty(2 * n).untyped_storage()
    # set_ rather than slices of one tensor: each half is a tensor of its own,
    # not a view of a base the tangent lookups of views would go through.
    value = tensor.new_empty(0).set_(memory, 0, tensor.shape)
    own = tensor.new_empty(0).set_(memory, n, tensor.shape)
    value.copy_(tensor)  # (as the mode runs it: other levels' tangents carry over)
    own.copy_(tangent)
    set_tangent(value, lvl, own)
    return value
