"""Collapsed Taylor mode (Dangel et al., NeurIPS 2025): the weighted sum over
directions v_n of the top Taylor coefficient, sum_n w_n d^K/dt^K f(x + t v_n),
with the sum pushed through the part of the program that is linear in the top
coefficients, so it is propagated once instead of once per direction.

From the Taylor program P(x0, x1) -> (f(x0), d^K/dt^K f(x0 + t x1)) (dualgen.jet
traced to aten ops, `_taylor_program`), every node of P is homogeneous in x1: of
degree 0 (a function of x0 only), 1..K-1 (lower coefficients), or K (the top).
The degrees are read off P by running it at x1 and 2 x1 (a node of degree k
scales by 2^k), at two points. Then the collapsed program runs each node once:

- degree 0: as it is;
- degrees 1..K-1: vmapped over the directions (one batch of N);
- degree K with an input of degree 1..K-1 (a product of lower coefficients):
  vmapped, then summed over the directions with the weights;
- degree K otherwise: linear in its top inputs, so it runs once on their sums.

Traced once more (make_fx), the collapsed program holds aten ops only, which
autograd, torch.vmap and torch.compile take. It is checked against the sum of
per-direction runs of P when built; a program it cannot collapse (a node of no
single degree) is the plain sum over directions instead, which is always right.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx
import torch.utils._pytree as pytree

from ..fx.graph import tracing
from ..fx.trace import trace
from ..taylor import jet as taylor_jet


@dataclass(frozen=True)
class Collapsed:
    """`program(x0, directions, weights, *parameters)` -> (f(x0), weighted sum of
    the top derivatives), flat; `collapsed` says whether the sum was pushed in."""

    program: torch.fx.GraphModule
    collapsed: bool


def build(
    f, x0: torch.Tensor, parameters: tuple, order: int, count: int, collapse=True
) -> Collapsed:
    """The collapsed operator program of `f(x, *parameters)` (one output
    tensor) at example `x0`, for `count` directions (shapes are traced);
    `collapse=False`: the plain sum over directions."""
    top = _taylor_program(f, x0, parameters, order)
    degrees = _degrees(top, x0, parameters, order) if collapse else None
    examples = (
        x0,
        torch.randn(count, *x0.shape, dtype=x0.dtype, device=x0.device),
        torch.randn(count, dtype=x0.dtype, device=x0.device),
    )
    if degrees is not None:
        try:
            program = tracing(_collapsed_runner(top, degrees, order))(
                *examples, *parameters
            )
        except Exception:  # noqa: BLE001 - degrees that do not fit: not collapsed
            program = None
        if program is not None and _agrees(program, top, examples, parameters):
            return Collapsed(program, True)
    return Collapsed(tracing(_summing_runner(top))(*examples, *parameters), False)


class _CannotCollapse(Exception):
    """A node of the top degree reads both a summed and a per-direction value."""


def _taylor_program(f, x0, parameters, order) -> torch.fx.GraphModule:
    """P(x0, x1, *parameters) -> (f(x0), d^K/dt^K f(x0 + t x1)), aten ops."""
    traced = trace(f, (x0, *parameters))

    def program(x, x1, *params):
        def at(y):
            return traced.graph_module(y, *params)  # the parameters: constants

        absent = [None] * (order - 1)  # x2.. are zero, and cost nothing
        (value,), ((*_, top),) = taylor_jet(at, (x,), ([x1, *absent],))
        return value, top

    gm = tracing(program)(x0.clone(), torch.randn_like(x0), *parameters)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _node_values(gm, *args) -> dict:
    values: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n] = out
            return out

    with torch.no_grad():
        Recorder(gm).run(*args)
    return values


def _degrees(top, x0, parameters, order) -> dict | None:
    """Each node's degree in x1, read at two points; None where a node has none."""
    degrees: dict = {}
    for shift in (0.0, 0.5):
        point = x0 + shift * torch.randn_like(x0)
        x1 = torch.randn_like(x0)
        once = _node_values(top, point, x1, *parameters)
        twice = _node_values(top, point, 2 * x1, *parameters)
        for node in top.graph.nodes:
            if node.op in ("output",):
                continue
            degree = _degree(once.get(node), twice.get(node), order)
            if degree is None:
                return None
            known = degrees.get(node)
            if known is not None and degree not in (known, 0) and known != 0:
                return None
            degrees[node] = max(degree, known or 0)
    return degrees


def _degree(a, b, order) -> int | None:
    """k where b = 2^k a (0 for equal values, constants and non-tensors)."""
    leaves_a = [v for v in pytree.tree_leaves(a) if isinstance(v, torch.Tensor)]
    leaves_b = [v for v in pytree.tree_leaves(b) if isinstance(v, torch.Tensor)]
    degree = 0
    for u, v in zip(leaves_a, leaves_b):
        if not (u.is_floating_point() or u.is_complex()) or u.numel() == 0:
            continue
        scale = float(u.abs().max()) + float(v.abs().max())
        if scale == 0:
            continue
        for k in range(order + 1):
            if torch.allclose(v, u * 2**k, rtol=1e-3, atol=1e-5 * scale):
                degree = max(degree, k)
                break
        else:
            return None
    return degree


def _collapsed_runner(top, degrees, order):
    def run(x0, directions, weights, *parameters):
        env: dict = {}
        batched: set = set()  # nodes whose value has a leading direction dim
        inputs = iter((x0, directions, *parameters))
        for node in top.graph.nodes:
            if node.op == "placeholder":
                env[node] = next(inputs)
                if degrees[node] and degrees[node] < order:
                    batched.add(node)
                continue
            if node.op == "get_attr":
                env[node] = getattr(top, node.target)
                continue
            if node.op == "output":
                value, summed = node.args[0]
                return env[value], env[summed]
            args, kwargs = pytree.tree_map(
                lambda a: env[a] if isinstance(a, torch.fx.Node) else a,
                (node.args, node.kwargs),
            )
            uses_batched = any(
                isinstance(a, torch.fx.Node) and a in batched
                for a in pytree.tree_leaves((node.args, node.kwargs))
            )
            if not uses_batched:
                env[node] = node.target(*args, **kwargs)
                continue
            flags = pytree.tree_map(
                lambda a: isinstance(a, torch.fx.Node) and a in batched,
                (node.args, node.kwargs),
            )
            out = _vmapped(node.target, args, kwargs, flags)
            if degrees[node] < order:
                env[node] = out
                batched.add(node)
            elif any(
                isinstance(a, torch.fx.Node) and degrees[a] == order
                for a in pytree.tree_leaves((node.args, node.kwargs))
            ):
                raise _CannotCollapse(node.name)  # a top value and a lower one mixed
            else:
                env[node] = pytree.tree_map(lambda v: _weighted_sum(v, weights), out)
        raise AssertionError("a program ends with its output")

    return run


def _vmapped(target, args, kwargs, flags):
    leaves, spec = pytree.tree_flatten((args, kwargs))
    marks = pytree.tree_leaves(flags)
    positions = [i for i, m in enumerate(marks) if m]

    def call(*batched):
        values = list(leaves)
        for i, v in zip(positions, batched):
            values[i] = v
        a, k = pytree.tree_unflatten(values, spec)
        return target(*a, **k)

    return torch.vmap(call)(*(leaves[i] for i in positions))


def _weighted_sum(value, weights):
    if not isinstance(value, torch.Tensor):
        return value
    return (weights.reshape(-1, *[1] * (value.dim() - 1)).to(value.dtype) * value).sum(
        0
    )


def _summing_runner(top):
    def run(x0, directions, weights, *parameters):
        value, _ = top(x0, directions[0], *parameters)
        tops = torch.vmap(lambda v: top(x0, v, *parameters)[1])(directions)
        return value, _weighted_sum(tops, weights)

    return run


def _agrees(program, top, examples, parameters) -> bool:
    """The collapsed program's value and sum, against P run per direction."""
    x0, directions, weights = examples
    with torch.no_grad():
        value, summed = program(x0, directions, weights, *parameters)
        runs = [top(x0, v, *parameters) for v in directions]
        expected = sum(w * run[1] for run, w in zip(runs, weights))
        scale = float(expected.abs().max()) + 1e-30
        return torch.allclose(value, runs[0][0]) and torch.allclose(
            summed, expected, rtol=1e-3, atol=1e-5 * scale
        )
