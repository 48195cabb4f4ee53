"""The one Jacobian engine of `dualgen.func` and `dualgen.functional`: columns of
the identity, split and shaped like a function's inputs, pushed through it by
forward mode, either all of a chunk at once as one batched tangent (under the
legacy vmap, as `torch._vmap_internals._vmap` batches, which dualgen takes for
the tangent of a plain primal) or one column a pass.

Reads the inputs (for their shapes, dtypes and devices) and a function of the
basis; produces the basis and what the function gives for it. What each API
makes of the columns (torch.func's pytrees and chunks, torch.autograd.functional's
blocks and strictness) stays with the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def basis(
    flat_primals: Sequence[torch.Tensor],
    numels: Sequence[int],
    start: int,
    stop: int,
    batched: bool,
) -> list[torch.Tensor]:
    """Columns start..stop-1 of the identity, split and shaped like the primals
    (with a leading dimension for the columns when batched)."""
    count, offset, columns = stop - start, 0, []
    for primal, numel in zip(flat_primals, numels):
        options = {"dtype": primal.dtype, "device": primal.device}
        if start == offset:  # (the common case, one op: a primal's first chunk)
            chunk = torch.eye(count, numel, **options)
        else:
            # Column start + r is row r's element start + r - offset of this
            # primal: the diagonal at that offset (empty where none falls here).
            chunk = torch.zeros(count, numel, **options)
            chunk.diagonal(start - offset).fill_(1)
        columns.append(
            chunk.view(count, *primal.shape) if batched else chunk.view(primal.shape)
        )
        offset += numel
    return columns


def push_batched(
    push: Callable[..., tuple[torch.Tensor, ...]], batched_basis: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    """`push(*columns)` for every column of `batched_basis` in one pass: what it
    returns (tensors only), each with the columns along a new first dimension.

    The legacy vmap's own steps (`torch._vmap_internals._vmap` with in and out
    dims 0), without its checks of arguments that are always the basis here."""
    size = batched_basis[0].shape[0]
    level = torch._C._vmapmode_increment_nesting()
    try:
        columns = [torch._add_batch_dim(b, 0, level) for b in batched_basis]
        outputs = push(*columns)
        return tuple(torch._remove_batch_dim(o, level, size, 0) for o in outputs)
    finally:
        torch._C._vmapmode_decrement_nesting()
