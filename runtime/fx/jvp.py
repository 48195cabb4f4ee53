"""The JVP of a traced function as a program: each node's op on the primals, then
the ops of its kernel on the tangents present there.

The program is itself traced (`make_fx`), so what comes back holds aten ops only.
A kernel branches on which tangents are present; that choice is made while
tracing, so an absent tangent costs nothing and never becomes a zeros tensor
(outputs no tangent reaches get zeros at the end, as torch.func.jvp gives them).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
import torch.utils._pytree as pytree

from ..dispatch.op_arguments import bind
from ..dtypes import in_dtype_of
from ..rules.table import rule_for_tracing
from ..tangents import is_differentiable_dtype
from . import readable, variants
from .finish import finished
from .graph import (
    NoRule,
    attribute,
    differentiable,
    output_nodes,
    tracing,
    writes_back,
)
from .passes import kernel_arguments, program_nodes, run_call
from .trace import Traced, distinct, mutates_within


def jvp_program(
    traced: Traced, primals: tuple, tangents: tuple
) -> torch.fx.GraphModule:
    count = len(primals)
    promote = all(
        t is None or not isinstance(p, torch.Tensor) or t.dtype == p.dtype
        for p, t in zip(primals, tangents)
    )

    # each original node's name -> the program's node of its tangent
    tangent_nodes: dict = {}

    def program(*values):
        env, tangent_env = _run(
            traced.graph_module, values[:count], values[count:], promote
        )
        tangent_nodes.update(program_nodes(tangent_env, lambda n: n.name))
        ends = output_nodes(traced.graph_module)
        outputs = [env[n] for n in ends]
        output_tangents = [
            _tangent_or_zeros(value, tangent_env.get(n))
            for n, value in zip(ends, outputs)
        ]
        return (
            pytree.tree_unflatten(outputs, traced.out_spec),
            pytree.tree_unflatten(output_tangents, traced.out_spec),
        )

    with fx_traceback.preserve_node_meta():
        gm = tracing(program)(*distinct((*primals, *tangents)))
    return finished(gm, tangent_nodes, traced, "tangent")


def _run(gm: torch.fx.GraphModule, primals, tangents, promote: bool):
    """The traced graph's nodes in order: each value, and each tangent (None:
    none reaches it)."""
    env: dict = {}
    tangent_env: dict = {}
    detached: set = set()  # values computed from a detached value that had a tangent
    inputs = iter(zip(primals, tangents))
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            with readable.role(node, "primal"):
                env[node], tangent_env[node] = next(inputs)
            continue
        if node.op == "output":
            continue
        if node.op == "get_attr":  # a tensor `f` closes over: a constant
            env[node], tangent_env[node] = attribute(gm, node.target), None
            continue
        args, kwargs = run_call(
            node, env, detached, lambda n: tangent_env.get(n) is not None, "tangent"
        )
        if writes_back(node):  # (the primal input `f` mutated; no tangent moves)
            tangent_env[node] = None
            continue
        if node.target is operator.getitem:
            source = tangent_env.get(node.args[0])
            tangent_env[node] = None if source is None else source[node.args[1]]
            continue
        tangent_env[node] = _tangent_of(
            node, args, kwargs, env[node], tangent_env, promote
        )
    return env, tangent_env


def _tangent_of(node, args, kwargs, out, tangent_env, promote: bool):
    op = node.target
    tangent_args, tangent_kwargs = _tangent_args(node, tangent_env)
    if not any(_present(t) for t in (*tangent_args, *tangent_kwargs.values())):
        return None
    if not isinstance(op, torch._ops.OpOverload):
        raise NoRule(f"dualgen.fx: cannot differentiate {op!r} (not an aten operator)")
    schema = op._schema
    input_tangents = bind(schema, tangent_args, tangent_kwargs)
    primals = kernel_arguments(schema, args, kwargs)
    if mutates_within(node):  # (functionalisation left it: never in practice)
        raise NoRule(f"dualgen.fx: the traced graph still updates in place: {op}")
    rule = rule_for_tracing(op) or variants.jvp_rule(op)
    if rule is None:
        if not any(differentiable(o) for o in _flat(out)):
            return None  # (a comparison, an index: nothing to differentiate)
        raise NoRule(
            f"dualgen.fx: no JVP kernel for {op} (add it to derivatives.yaml or "
            "register a rule with dualgen.register_jvp)"
        )
    tangents = [_as_tangent(input_tangents[i]) for i in rule.input_indices]
    if all(t is None for t in tangents):
        return None
    outputs = out if len(schema.returns) > 1 else (out,)
    with readable.role(node, "tangent", rule):
        results = rule.call(primals, tangents, outputs)
        results = results if len(outputs) > 1 else (results,)
        given = [
            _conformed(value, output, carried, promote)
            for value, output, carried in zip(
                results, outputs, rule.differentiable_outputs
            )
        ]
    return tuple(given) if len(schema.returns) > 1 else given[0]


def _flat(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _tangent_args(node, tangent_env) -> tuple[tuple, dict]:
    """The node's arguments with each input node replaced by its tangent (None
    for everything else)."""

    def tangent(arg):
        return tangent_env.get(arg) if isinstance(arg, torch.fx.Node) else None

    return (
        torch.fx.node.map_aggregate(node.args, tangent),
        torch.fx.node.map_aggregate(node.kwargs, tangent),
    )


def _present(t) -> bool:
    if isinstance(t, (list, tuple)):
        return any(v is not None for v in t)
    return t is not None


def _as_tangent(t):
    if isinstance(t, (list, tuple)):
        return list(t) if any(v is not None for v in t) else None
    return t


def _conformed(value, output, differentiable: bool, promote: bool):
    if not differentiable or value is None:
        return None
    if isinstance(output, (list, tuple)):
        return [_conformed(v, o, True, promote) for v, o in zip(value, output)]
    if not isinstance(output, torch.Tensor) or not is_differentiable_dtype(output):
        return None
    return in_dtype_of(value, output) if promote else value


def _tangent_or_zeros(output, tangent):
    if tangent is not None or not isinstance(output, torch.Tensor):
        return tangent
    return torch.zeros_like(output)


def jvp(f: Callable, primals, tangents) -> torch.fx.GraphModule:
    """See `dualgen.fx.jvp`."""
    from .trace import trace

    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(
            f"dualgen.fx.jvp: {len(primals)} primals but {len(tangents)} tangents"
        )
    return jvp_program(trace(f, primals), primals, tangents)
