"""Shared by the batching-rule tests: a call under legacy vmap with dualgen's rules
against the same call without them (torch's own rule or its for-loop fallback)
and against each batch element's own call."""

from __future__ import annotations

import torch
from devices import DEVICE
from torch._vmap_internals import _vmap

from dualgen.hot_path import policy as hot_path

F64 = torch.float64
BATCH = 3


def rand(*shape, seed=0):
    gen = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=F64, generator=gen)


def vmapped(fn, args, batched, nested):
    """fn over the arguments flagged in `batched` (a leading batch of BATCH, and
    of 2 more outside it when nested), the others as they are."""
    in_dims = tuple(0 if b else None for b in batched)
    inner = _vmap(fn, in_dims=in_dims)
    return _vmap(inner, in_dims=in_dims)(*args) if nested else inner(*args)


def batched_args(shapes, batched, nested, seed=0):
    args = []
    for i, (shape, b) in enumerate(zip(shapes, batched)):
        lead = ((2,) if nested else ()) + (BATCH,) if b else ()
        args.append(rand(*lead, *shape, seed=seed + i))
    return args


def against_torchs(fn, shapes, batched, nested=False, loop_refuses=False):
    """fn under legacy vmap with dualgen's rules against the same without them
    (unless `loop_refuses`: torch's fallback cannot run the op, a list output)
    and against each batch element's own call."""
    args = batched_args(shapes, batched, nested)
    ours = vmapped(fn, args, batched, nested)
    if not loop_refuses:
        hot_path.set_batching_rules(False)
        try:
            theirs = vmapped(fn, args, batched, nested)
        finally:
            hot_path.set_batching_rules(True)
        torch.testing.assert_close(ours, theirs)
    # and each element's own call (a tuple of outputs or one)
    outputs = ours if isinstance(ours, tuple) else (ours,)
    for index in (
        [(o, b) for o in range(2) for b in range(BATCH)]
        if nested
        else [(b,) for b in range(BATCH)]
    ):
        element = [a[index] if flag else a for a, flag in zip(args, batched)]
        expected = fn(*element)
        expected = expected if isinstance(expected, tuple) else (expected,)
        torch.testing.assert_close(tuple(o[index] for o in outputs), expected)


def batched_kernel(op: str) -> str:
    """Where the op's kernel for legacy vmap's key was registered."""
    dump = torch._C._dispatch_dump(f"aten::{op}").splitlines()
    return next((line for line in dump if line.startswith("Batched:")), "")


def assert_registered_by_dualgen(op: str) -> None:
    """op's Batched kernel is dualgen's while its rules are on, and torch's (or
    its fallback) while they are off: else the comparisons would hold torch's
    rules to themselves."""
    assert "dualgen/batching.cpp" in batched_kernel(op)
    hot_path.set_batching_rules(False)
    try:
        assert "dualgen/batching.cpp" not in batched_kernel(op)
    finally:
        hot_path.set_batching_rules(True)
    assert "dualgen/batching.cpp" in batched_kernel(op)
