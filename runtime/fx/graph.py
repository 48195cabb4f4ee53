"""What the JVP and VJP transforms share about a traced graph: its outputs, the
values its nodes hold, and the arguments its kernels are called with."""

from __future__ import annotations

import torch
import torch.fx
from torch.fx.experimental import proxy_tensor

from .. import torch_features
from ..tangents import is_differentiable_dtype


class NoRule(RuntimeError):
    """An op a tangent (a cotangent) reaches has no kernel and no user rule."""


def tracing(f):
    """make_fx of `f` with real tensors, under one fake mode that records the
    metadata of every traced value (`node.meta["val"]`): by itself make_fx
    makes a new fake mode for each one, most of a small trace's time."""
    torch_features.require("fx")
    from torch._subclasses.fake_tensor import FakeTensorMode

    # An explicit (empty) decomposition table keeps `detach` a node of its own:
    # without one, torch 2.14's make_fx writes it as `alias`, a view that would
    # carry the tangent a detach cuts.
    traced = proxy_tensor.make_fx(f, decomposition_table={}, tracing_mode="real")

    def trace(*args):
        context = torch._guards.TracingContext(
            FakeTensorMode(allow_fallback_kernels=True)
        )
        with torch._guards.tracing(context):
            return traced(*args)

    return trace


def output_nodes(gm: torch.fx.GraphModule) -> list:
    output = next(n for n in gm.graph.nodes if n.op == "output")
    return list(output.args[0])


def attribute(gm: torch.fx.GraphModule, target: str):
    """The value of a `get_attr` node: a tensor `f` closes over, a constant."""
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def node_of(value) -> torch.fx.Node | None:
    """The node the tracer made for `value` (a tensor being traced)."""
    if not isinstance(value, torch.Tensor):
        return None
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return None
    slot = proxy_tensor.get_proxy_slot(value, mode.tracer, None)
    return None if slot is None else slot.proxy.node


def writes_back(node: torch.fx.Node) -> bool:
    """The copy of a new value into an input `f` mutated, at the end of a
    functionalised graph."""
    return (
        node.target is torch.ops.aten.copy_.default and node.args[0].op == "placeholder"
    )


# Functionalisation writes `x.detach().mul_(2)` and `x.copy_(x.detach() * 2)`
# alike, yet native keeps x's derivative in the first and drops it in the
# second: a program of values cannot tell which `f` did.
THROUGH_A_DETACHED_ALIAS = (
    "dualgen.fx: f updates an input that has a {} from a detached alias of it "
    "(an in-place op on x.detach(), or under torch.no_grad, as "
    "F.embedding(max_norm=...) does): a program of values cannot tell whether "
    "the input keeps it; use dualgen.forward_ad or torch.autograd for f"
)


def from_detached(node: torch.fx.Node, carries, detached: set) -> bool:
    """Whether `node` is computed from a detached value of one that `carries` a
    derivative (`detached`: the nodes found so far)."""
    inputs = node.all_input_nodes
    if node.target is torch.ops.aten.detach.default:
        return any(carries(n) for n in inputs)
    return any(n in detached for n in inputs)


def differentiable(value) -> bool:
    return isinstance(value, torch.Tensor) and is_differentiable_dtype(value)


def wrapped_numbers(schema, values: list) -> list:
    """A number where the schema has a Tensor as the dispatcher hands it to a
    kernel: a 0-d tensor of the number's own kind (double, long, complex, bool),
    as the runtime's kernels get it (the graph keeps the number itself)."""
    out = list(values)
    for i, argument in enumerate(schema.arguments):
        kind = type(out[i])
        if kind in _NUMBER_DTYPES and isinstance(argument.type, torch.TensorType):
            out[i] = torch.scalar_tensor(out[i], dtype=_NUMBER_DTYPES[kind])
    return out


_NUMBER_DTYPES = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}
