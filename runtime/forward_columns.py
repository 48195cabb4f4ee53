"""The one Jacobian engine of `dualgen.func` and `dualgen.functional`: columns of
the identity, split and shaped like a function's inputs, pushed through it by
forward mode, either all of a chunk at once as one batched tangent (under the
legacy vmap, `torch._vmap_internals._vmap`, which dualgen takes for the tangent
of a plain primal) or one column a pass.

Reads the inputs (for their shapes, dtypes and devices) and a function of the
basis; produces the basis and what the function gives for it. What each API
makes of the columns (torch.func's pytrees and chunks, torch.autograd.functional's
blocks and strictness) stays with the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch._vmap_internals import _vmap


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
        chunk = torch.zeros(count, numel, dtype=primal.dtype, device=primal.device)
        low, high = max(start, offset), min(stop, offset + numel)
        if low < high:
            rows = chunk.narrow(0, low - start, high - low)
            rows.narrow(1, low - offset, high - low).diagonal().fill_(1)
        columns.append(
            chunk.view(count, *primal.shape) if batched else chunk.view(primal.shape)
        )
        offset += numel
    return columns


def push_batched(
    push: Callable[..., tuple[torch.Tensor, ...]], batched_basis: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    """`push(*columns)` for every column of `batched_basis` in one pass: what it
    returns (tensors only), each with the columns along a new first dimension."""
    outputs = _vmap(push)(*batched_basis)
    if isinstance(outputs, torch.Tensor):  # the legacy vmap returns a lone one bare
        outputs = (outputs,)
    return tuple(outputs)
