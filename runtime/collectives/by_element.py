"""MAX, MIN and PRODUCT across ranks, from all-gathered duals (reduce.py says
why): one all-gather of each packed tensor, then every rank reduces the
gathered values and tangents itself; a reduce-scatter keeps its own chunk, a
reduce to one rank writes only there."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

from ..tangents import tangent_of
from . import values as dual_values
from .deferred import deferred
from .reduce import reduced as reduce_across

c10d = torch.ops.c10d


def run(func, entry, values: list, where: dict, kind: str, level):
    """The collective `func` (its arguments bound: `values`), reducing by `kind`:
    a c10d op returns a Work that writes the results when waited for."""
    group = _Group(values, where)
    pairs = _pairs(func, entry, values, where, level)
    gathers = [group.all_gather(source) for source, _ in pairs]

    def reduced(i: int, shape) -> tuple:
        gathered = gathers[i][0]()  # (ranks, *shape, 2)
        if entry.scatters:  # (ranks, ranks' chunks, *chunk shape, 2): this rank's
            gathered = gathered.reshape(group.size, group.size, -1, 2)[:, group.rank]
        value, tangent = reduce_across(kind, gathered[..., 0], gathered[..., 1])
        return value.reshape(shape), tangent.reshape(shape)

    if entry.returns_new:
        sources = dual_values.flat(values[where[entry.reads[0]]])
        results = [
            dual_values.new_value(
                *reduced(i, _shape(source, entry, group)),
                level,
                tangent_of(sources[i], level) is not None,
            )
            for i, (source, _) in enumerate(pairs)
        ]
        single = isinstance(values[where[entry.reads[0]]], torch.Tensor)
        return results[0] if single else results
    writes_here = entry.root is None or group.rank == values[where[entry.root]]
    targets = [target for _, target in pairs]

    def finish(alive: bool = True) -> None:
        for i, target in enumerate(targets):
            if writes_here:
                value, tangent = reduced(i, target.shape)
                dual_values.write_value(
                    target, value, tangent, level if alive else None
                )

    if group.name is not None:  # a functional out= variant: done on return
        finish()
        return _returned(func, entry, values, where, None)
    works = [work for _, work in gathers]
    return _returned(
        func, entry, values, where, deferred(works, finish, targets, level)
    )


def _pairs(func, entry, values, where, level) -> list:
    """(the packed tensor sent, the tensor written or None for a new one) per
    reduction."""
    sent = values[where[entry.reads[0]]]
    if entry.returns_new:
        return [(dual_values.pack(t, level), None) for t in dual_values.flat(sent)]
    written = values[where[entry.writes[0]]]
    if func is c10d.reduce_scatter_.default:  # one output, its ranks' chunks as a list
        return [
            (torch.stack([dual_values.pack(c, level) for c in chunks]), out)
            for chunks, out in zip(sent, written)
        ]
    return [
        (dual_values.pack(t, level), w)
        for t, w in zip(dual_values.flat(sent), dual_values.flat(written))
    ]


def _shape(packed, entry, group) -> tuple:
    """A new result's shape, from the packed tensor sent."""
    shape = tuple(packed.shape[:-1])
    return (shape[0] // group.size, *shape[1:]) if entry.scatters else shape


def _returned(func, entry, values, where, work):
    """What the c10d op returns: its written tensors and a Work, per its schema."""
    written = iter(values[where[name]] for name in entry.writes)
    out = []
    for r in func._schema.returns:
        out.append(work if "Work" in str(r.type) else next(written))
    return out[0] if len(out) == 1 else tuple(out)


class _Group:
    """The process group of a c10d op (a script object) or of a functional
    collective (its name): size, rank, and an all-gather along a new dim 0."""

    def __init__(self, values: list, where: dict):
        if "process_group" in where:
            self.script = values[where["process_group"]]
            group = ProcessGroup.unbox(self.script)
            self.name = None
        else:
            from torch.distributed.distributed_c10d import _resolve_process_group

            self.name = values[where["group_name"]]
            group = _resolve_process_group(self.name)
        self.size, self.rank = group.size(), group.rank()

    def all_gather(self, packed: torch.Tensor) -> tuple:
        """(what gives every rank's `packed` along a new dim 0 once it has
        arrived, the Work to wait for: None for a functional collective, waited
        for here). (The view is taken once the tensor has its tangents.)"""
        packed = packed.contiguous()
        if self.name is not None:
            out = torch.ops._c10d_functional.all_gather_into_tensor.default(
                packed, self.size, self.name
            )
            out = torch.ops._c10d_functional.wait_tensor.default(out)
            return lambda: out.view(self.size, *packed.shape), None
        out = packed.new_empty((self.size * packed.shape[0], *packed.shape[1:]))
        _, work = c10d._allgather_base_.default(out, packed, self.script, True)
        return lambda: out.view(self.size, *packed.shape), dist.Work.unbox(work)
