"""What the two derivative programs (jvp.py, vjp.py) share: their primal pass over
the traced graph, the arguments they hand the generated kernels, and how they
find the program nodes of the derivatives they traced."""

from __future__ import annotations

import torch
import torch.fx

from ..dispatch.op_arguments import bind
from . import readable
from .graph import (
    THROUGH_A_DETACHED_ALIAS,
    NoRule,
    from_detached,
    node_of,
    wrapped_numbers,
    writes_back,
)


def call_values(node: torch.fx.Node, env: dict) -> tuple:
    """A call node's (args, kwargs) with the values of the nodes in `env`."""
    return (
        torch.fx.node.map_arg(node.args, env.__getitem__),
        torch.fx.node.map_arg(node.kwargs, env.__getitem__),
    )


def run_call(node: torch.fx.Node, env: dict, detached: set, carries, what: str):
    """Runs `node`'s op on the values in `env` into `env[node]` and returns its
    (args, kwargs). `carries(n)`: whether node n's value has a derivative (a
    `what`: "tangent", "gradient"); `detached` collects the nodes computed from
    a detached alias of such a value. Writing one of those back into the input
    is refused: no program of values can tell whether the input keeps its
    derivative."""
    args, kwargs = call_values(node, env)
    with readable.role(node, "primal"):
        env[node] = node.target(*args, **kwargs)
    if from_detached(node, carries, detached):
        detached.add(node)
    if writes_back(node) and node.args[1] in detached and carries(node.args[0]):
        raise NoRule(THROUGH_A_DETACHED_ALIAS.format(what))
    return args, kwargs


def kernel_arguments(schema, args, kwargs) -> list:
    """An op call's arguments bound to its schema, as the generated kernels take
    them (numbers where the schema has a Tensor: 0-d tensors)."""
    return wrapped_numbers(schema, bind(schema, args, kwargs))


def program_nodes(derivatives: dict, name_of) -> dict:
    """The program's node of each derivative value traced (`derivatives`: by
    original node), by the name `name_of(original node)`; values that are no
    program node (None, constants) are left out."""
    found = {}
    for original, value in derivatives.items():
        node = node_of(value)
        if node is not None:
            found[name_of(original)] = node
    return found
