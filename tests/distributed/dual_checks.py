"""What the case modules share: every rank's inputs (from seeds, so each rank
can make all of them), the single-process JVP to compare with, and a mode that
sees what reaches the process group."""

from __future__ import annotations

import torch
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

import dualgen.forward_ad as fwAD

F64 = torch.float64


def duals(world_size: int, shape, seed: int, device, ties: bool = False):
    """Every rank's value and tangent (lists, indexed by rank)."""
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(shape, generator=g, dtype=F64) for _ in range(world_size)]
    ts = [torch.randn(shape, generator=g, dtype=F64) for _ in range(world_size)]
    if ties:  # equal values on ranks 0 and 1 in the first row, a zero on rank 0
        for x in xs[1:2]:
            x.view(-1)[:2] = xs[0].view(-1)[:2]
        xs[0].view(-1)[2] = 0.0
    return [x.to(device) for x in xs], [t.to(device) for t in ts]


def jvp_of(f, xs, ts):
    """torch.func.jvp of f over all ranks' values stacked on dim 0."""
    return torch.func.jvp(f, (torch.stack(xs),), (torch.stack(ts),))


def check(dual, expected) -> None:
    primal, tangent = fwAD.unpack_dual(dual)
    assert tangent is not None, "no tangent"
    assert_close(primal, expected[0])
    assert_close(tangent, expected[1])


REDUCE = {
    "SUM": lambda s: s.sum(0),
    "AVG": lambda s: s.mean(0),
    "MAX": lambda s: s.amax(0),
    "MIN": lambda s: s.amin(0),
    "PRODUCT": lambda s: s.prod(0),
}


class Counting(TorchDispatchMode):
    """The collectives that reach the process group (a mode below dualgen's)."""

    def __enter__(self):
        self.ops = []
        self.memory = []  # (address, elements) of each op's first tensor
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace in ("c10d", "_c10d_functional"):
            self.ops.append(str(func))
            first = args[0][0] if isinstance(args[0], list) else args[0]
            self.memory.append((first.data_ptr(), first.numel()))
        return func(*args, **(kwargs or {}))
