"""A function of tensors as an aten-level torch.fx graph, without mutation.

`make_fx` traces below autograd (composite ops such as `linear` come apart into
the aten ops the spec has kernels for), and `functionalize` turns in-place ops
into their functional forms, so every node is a value computed once: a JVP or
VJP transform then never has to update a tangent in place. Views stay views; an
input that `f` mutates is written back at the end, as `f` would have.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx
import torch.utils._pytree as pytree

from . import readable
from .graph import THROUGH_A_DETACHED_ALIAS, NoRule, tracing


@dataclass(frozen=True)
class Traced:
    """`f` at the example values: its graph (flat tensor inputs, flat outputs),
    the structure of its outputs, and names for its inputs."""

    graph_module: torch.fx.GraphModule
    out_spec: pytree.TreeSpec
    input_names: tuple[str, ...]
    source: str | None  # where `f` is, for the comment above its own ops
    name: str  # `f`'s name, for the programs' classes (`f_jvp`, `f_vjp`)


def trace(f: Callable, primals: tuple) -> Traced:
    spec: list[pytree.TreeSpec] = []

    def flat(*args):
        leaves, out_spec = pytree.tree_flatten(f(*args))
        spec.append(out_spec)
        return leaves

    functional = torch.func.functionalize(flat, remove="mutations")
    gm = _functional_graph(functional, primals)
    if any(n.target is torch.ops.aten.detach.default for n in gm.graph.nodes):
        _refuse_updates_through_detached_aliases(flat, primals)
    if _mutates_within(gm):
        # A decomposition that ran in Python below functionalisation can leave
        # an in-place op (margin_ranking_loss's clamp_min_): the graph, run
        # through functionalisation once more, has none.
        gm = _functional_graph(
            torch.func.functionalize(gm, remove="mutations"), primals
        )
    return Traced(
        gm,
        spec[-1],
        input_names(f, len(primals)),
        readable.function_trace(f),
        function_name(f),
    )


def _functional_graph(f: Callable, primals: tuple) -> torch.fx.GraphModule:
    # A value `f` reads while traced (`.item()`, `torch.equal`) stops the trace
    # (make_fx's error): a program that fixed it would give wrong derivatives,
    # without a word, at other values.
    return tracing(f)(*distinct(primals))


def _refuse_updates_through_detached_aliases(f: Callable, primals: tuple) -> None:
    """Native keeps a value's derivative when it is updated in place through a
    detached alias (`y.detach().mul_(2)`, F.embedding's max_norm); the
    functional graph writes that update as it writes `y.detach() * 2`, which
    has none. Seen in `f`'s graph before functionalisation, it is refused."""
    plain = tracing(f)(*distinct(primals))
    detached: set = set()
    for node in plain.graph.nodes:
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
            continue
        first = node.args[0] if node.args else None
        writes = bool(op._schema.arguments) and _writes_first(op)
        if writes and first in detached:
            raise NoRule(THROUGH_A_DETACHED_ALIAS.format("derivative"))
        if op is torch.ops.aten.detach.default or (
            first in detached and _aliases_first(op)
        ):
            detached.add(node)


def _writes_first(op) -> bool:
    alias = op._schema.arguments[0].alias_info
    return alias is not None and alias.is_write


def _aliases_first(op) -> bool:
    """A view of its first argument (`Tensor(a) self -> Tensor(a)`)."""
    returns = op._schema.returns
    return bool(returns) and returns[0].alias_info is not None


def _mutates_within(gm: torch.fx.GraphModule) -> bool:
    """An op that writes one of its arguments, other than the write-back of an
    input `f` mutated."""
    return any(mutates_within(node) for node in gm.graph.nodes)


def mutates_within(node: torch.fx.Node) -> bool:
    op = node.target
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return False
    if not op._schema.is_mutable:
        return False
    written_back = (
        op is torch.ops.aten.copy_.default and node.args[0].op == "placeholder"
    )
    return not written_back


def distinct(values: tuple) -> tuple:
    """Copies of the tensors to trace with: the tracer knows a tensor by its
    identity (one passed twice, a primal as its own tangent, would be one
    input), and tracing runs `f`, which must not update the caller's tensors
    (each transform traces more than once)."""
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def function_name(f: Callable) -> str:
    name = getattr(f, "__name__", None) or type(f).__name__
    return name if name.isidentifier() else "f"


def input_names(f: Callable, count: int) -> tuple[str, ...]:
    """`f`'s parameter names where they are plain positional ones, else
    `input_0`, `input_1`, ..."""
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    plain = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
    names = [p.name for p in parameters[:count] if p.kind in plain]
    if len(names) != count or len(set(names)) != count:
        return tuple(f"input_{i}" for i in range(count))
    return tuple(names)
