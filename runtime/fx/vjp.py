"""The VJP of a traced function as a program: the function's ops, then the
generated VJP kernels of the nodes a cotangent reaches, walking the graph in
reverse (the DiffFX notebook's backward pass, with the spec's formulas).

Cotangents that reach a node from several users are summed; a gradient comes
back in its input's dtype (the real part for a real input, as autograd gives
it); an input no cotangent reaches gets zeros, as torch.func.vjp gives.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
import torch.utils._pytree as pytree

from ..dispatch.op_arguments import bind
from ..dtypes import in_gradient_dtype
from ..rules.table import generated_kernels
from . import readable, variants
from .finish import finished
from .graph import NoRule, attribute, differentiable, output_nodes, tracing
from .passes import call_values, kernel_arguments, program_nodes, run_call
from .trace import Traced, distinct, trace


def vjp(f: Callable, primals) -> torch.fx.GraphModule:
    """See `dualgen.fx.vjp`."""
    primals = tuple(primals)
    return vjp_program(trace(f, primals), primals)


def vjp_program(traced: Traced, primals: tuple) -> torch.fx.GraphModule:
    count = len(primals)
    gm = traced.graph_module
    grad_nodes: dict = {}  # original node's name -> the program's node of its cotangent

    def program(*values):
        env = _forward(gm, values[:count])
        outputs = [env[n] for n in output_nodes(gm)]
        cotangents = pytree.tree_leaves(values[count])
        grads = _backward(gm, env, cotangents)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        input_names = dict(zip(placeholders, traced.input_names))
        grad_nodes.update(program_nodes(grads, lambda n: input_names.get(n, n.name)))
        gradients = tuple(_grad_or_zeros(grads.get(p), env[p]) for p in placeholders)
        return pytree.tree_unflatten(outputs, traced.out_spec), gradients

    example = _example_cotangents(traced, primals)
    with fx_traceback.preserve_node_meta():
        program_gm = tracing(program)(
            *distinct(primals), pytree.tree_map(_distinct_one, example)
        )
    return finished(program_gm, grad_nodes, traced, "grad")


def _distinct_one(value):
    return distinct((value,))[0]


def _example_cotangents(traced: Traced, primals: tuple):
    """Cotangents shaped like `f`'s outputs (the values do not matter: the
    program is traced with them)."""
    with torch.no_grad():
        outputs = traced.graph_module(*distinct(primals))
    leaves = [
        torch.ones_like(o) if isinstance(o, torch.Tensor) else None for o in outputs
    ]
    return pytree.tree_unflatten(leaves, traced.out_spec)


def _forward(gm: torch.fx.GraphModule, primals) -> dict:
    env: dict = {}
    detached: set = set()
    inputs = iter(primals)

    def carries(node) -> bool:  # (whether a gradient may flow to its value)
        return differentiable(env.get(node))

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(inputs)
        elif node.op == "get_attr":
            env[node] = attribute(gm, node.target)
        elif node.op == "call_function":
            run_call(node, env, detached, carries, "gradient")
    return env


def _backward(gm: torch.fx.GraphModule, env: dict, cotangents: list) -> dict:
    grads: dict = {}  # node -> its cotangent
    pieces: dict = {}  # node of several outputs -> their cotangents
    for node, g in zip(output_nodes(gm), cotangents):
        if isinstance(node, torch.fx.Node) and isinstance(g, torch.Tensor):
            _accumulate(grads, node, env[node], g)
    for node in reversed(list(gm.graph.nodes)):
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            g = grads.pop(node, None)
            if g is not None:
                slot = pieces.setdefault(node.args[0], {})
                slot[node.args[1]] = g
            continue
        _backward_op(node, env, grads, pieces)
    return grads


def _backward_op(node, env: dict, grads: dict, pieces: dict) -> None:
    op = node.target
    many = isinstance(op, torch._ops.OpOverload) and len(op._schema.returns) > 1
    if many:
        given = pieces.pop(node, {})
        if not given:
            return
    elif node not in grads:
        return
    info, base = _vjp_info(op) if isinstance(op, torch._ops.OpOverload) else (None, op)
    if info is None:
        raise NoRule(f"dualgen.fx: no VJP kernel for {op} (add it to derivatives.yaml)")
    out = env[node]
    outputs = list(out) if many else [out]
    schema = op._schema
    arguments = kernel_arguments(schema, *call_values(node, env))
    if base is not op:  # a functional variant: the base op's view of them
        arguments, outputs = variants.as_base(op, base, arguments, outputs)
    if (
        len(outputs) > 1
    ):  # (autograd gives the kernel zeros for the outputs it has none for)
        grad_arg = tuple(
            given.get(i, torch.zeros_like(o) if differentiable(o) else None)
            for i, o in enumerate(outputs)
        )
    else:
        grad_arg = given.get(0) if many else grads[node]
        if grad_arg is None:
            return
    inputs = bind(schema, node.args, node.kwargs)
    names = info.arguments  # (the spec's: a torch release may rename some)
    with readable.role(node, "grad", _VjpRule(info)):
        results = info.vjp(grad_arg, *arguments, *outputs)
        for name, g in zip(info.differentiable_inputs, results, strict=True):
            source = inputs[names.index(name)]
            if isinstance(source, (list, tuple)):
                for s, gi in zip(source, g or [None] * len(source)):
                    if isinstance(s, torch.fx.Node) and gi is not None:
                        _accumulate(grads, s, env[s], gi)
            elif isinstance(source, torch.fx.Node) and g is not None:
                _accumulate(grads, source, env[source], g)


def _vjp_info(op):
    """The kernels of `op`, or of the op a functional variant stands for
    (variants.py), and that op: VJP kernels are pure functions of the
    gradients, arguments and outputs either way."""
    kernels = generated_kernels()
    if op in kernels:
        return kernels[op], op
    base = variants.stands_for(op)
    return (kernels.get(base), base) if base is not None else (None, op)


class _VjpRule:
    """What `readable.role` reads of a rule: the kernel and where it came from."""

    def __init__(self, info):
        self.call = info.vjp
        self.origin = f"derivatives.yaml entry {info.derived_from or info.name}"


def _accumulate(grads: dict, node, value, g) -> None:
    if not differentiable(value):
        return
    g = in_gradient_dtype(g, value.dtype)
    if g.shape != value.shape:
        raise RuntimeError(
            f"dualgen.fx: the VJP of {node.target} returned a gradient of shape "
            f"{list(g.shape)} for a value of shape {list(value.shape)}"
        )
    previous = grads.get(node)
    grads[node] = g if previous is None else previous + g


def _grad_or_zeros(g, primal):
    if g is not None or not isinstance(primal, torch.Tensor):
        return g
    return torch.zeros_like(primal)
