"""Taylor mode as a program: `jet(f, primals, order)` is the aten graph of
`dualgen.jet` on `f`'s functional graph (`trace.py`: in-place ops are functional
there, so no series is ever written into a plain tensor), traced once more so
that what comes back holds aten ops only: each op's coefficients computed by the
rule the generator read off its formula.

    gm = dualgen.fx.jet(f, (x,), order=3)
    outputs, series = gm(x, [[x1, x2, x3]])  # as dualgen.jet(f, (x,), ([x1, x2, x3],))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx
import torch.utils._pytree as pytree

from ..taylor import jet as taylor_jet
from .graph import tracing
from .trace import distinct, trace


class JetProgram(torch.nn.Module):
    """`program(*primals, series)`: the flat Taylor program `graph_module` (its
    inputs the primals then each primal's coefficients, its outputs each output's
    value then its coefficients), with the structure of `f`'s outputs."""

    def __init__(self, graph_module, out_spec, primals: int, order: int):
        super().__init__()
        self.graph_module = graph_module
        self.out_spec = out_spec
        self.primals = primals
        self.order = order

    def forward(self, *args):
        *primals, series = args
        if len(primals) != self.primals or len(series) != self.primals:
            raise ValueError(
                f"this jet program takes {self.primals} primals and a list of "
                f"{self.primals} series"
            )
        flat = self.graph_module(*primals, *(x for s in series for x in s))
        count = len(flat) // (1 + self.order)
        values = flat[:count]
        coefficients = [
            list(flat[count + i * self.order : count + (i + 1) * self.order])
            for i in range(count)
        ]
        return (
            pytree.tree_unflatten(list(values), self.out_spec),
            pytree.tree_unflatten(coefficients, self.out_spec),
        )

    @property
    def code(self) -> str:
        return self.graph_module.code


def jet(f: Callable, primals: tuple, order: int) -> JetProgram:
    """The Taylor program of `f` to `order`, traced at `primals`."""
    if order < 1:
        raise ValueError("jet: order must be at least 1")
    primals = tuple(primals)
    traced = trace(f, primals)
    count = len(primals)

    def program(*flat):
        xs, rest = flat[:count], flat[count:]
        series = [list(rest[i * order : (i + 1) * order]) for i in range(count)]
        values, coefficients = taylor_jet(traced.graph_module, xs, series)
        return (*values, *(c for per_output in coefficients for c in per_output))

    examples = [torch.randn_like(p) for p in primals for _ in range(order)]
    graph_module = tracing(program)(*distinct(primals), *examples)
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return JetProgram(graph_module, traced.out_spec, count, order)
