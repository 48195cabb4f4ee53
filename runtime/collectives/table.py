"""What each collective reads and writes, by argument name.

torch.distributed's process-group calls reach the dispatcher as `c10d::` ops that
write into tensors they are given (their schemas do not say so); the functional
collectives (`_c10d_functional::`) return new tensors, waited for by
`wait_tensor`. One table says, for each, which arguments it reads and writes
(a tensor, a list of them, or a list of lists) and which argument holds the
reduce kind; the forward-AD rule of every linear collective follows from that
alone (`dual.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Collective:
    reads: tuple[str, ...]  # arguments whose tensors are sent
    writes: tuple[str, ...]  # arguments whose tensors receive (in place)
    reduce: str | None = None  # the argument naming the reduce kind
    returns_new: bool = False  # a functional collective: returns new tensors
    scatters: bool = False  # reduce-scatter: each rank keeps one chunk of the result
    root: str | None = None  # the argument naming the one rank that receives
    # Element by element (reductions, broadcasts, point to point): a tensor's
    # elements may travel in any order, so value and tangent go as two halves.
    elementwise: bool = False


PASSES_THROUGH = "passes through"  # wait_tensor: returns its input, tangent and all
NO_DATA = "no data"  # barriers: the tensor is a token

_C10D = {
    "allreduce_": Collective(("tensors",), ("tensors",), "reduce_op", elementwise=True),
    "allreduce_coalesced_": Collective(
        ("tensors",), ("tensors",), "reduce_op", elementwise=True
    ),
    "allgather_": Collective(("input_tensors",), ("output_tensors",)),
    "_allgather_base_": Collective(("input_tensor",), ("output_tensor",)),
    "allgather_coalesced_": Collective(("input_list",), ("output_lists",)),
    "allgather_into_tensor_coalesced_": Collective(("inputs",), ("outputs",)),
    "reduce_scatter_": Collective(
        ("input_tensors",), ("output_tensors",), "reduce_op", scatters=True
    ),
    "_reduce_scatter_base_": Collective(
        ("input_tensor",), ("output_tensor",), "reduce_op", scatters=True
    ),
    "reduce_scatter_tensor_coalesced_": Collective(
        ("inputs",), ("outputs",), "reduce_op", scatters=True
    ),
    "broadcast_": Collective(("tensors",), ("tensors",), elementwise=True),
    "reduce_": Collective(
        ("tensors",), ("tensors",), "reduce_op", root="root_rank", elementwise=True
    ),
    "alltoall_": Collective(("input_tensors",), ("output_tensors",)),
    "alltoall_base_": Collective(("input",), ("output",)),
    "gather_": Collective(("input_tensors",), ("output_tensors",)),
    "scatter_": Collective(("input_tensors",), ("output_tensors",)),
    "send": Collective(("tensors",), (), elementwise=True),
    "recv_": Collective((), ("tensors",), elementwise=True),
    "recv_any_source_": Collective((), ("tensors",), elementwise=True),
    "barrier": NO_DATA,
    "monitored_barrier_": NO_DATA,
    "check_for_nan": NO_DATA,  # (reads the value only: raises if it has a NaN)
}

_FUNCTIONAL = {
    "all_reduce": Collective(
        ("input",), (), "reduce_op", returns_new=True, elementwise=True
    ),
    "all_reduce_": Collective(("input",), ("input",), "reduce_op", elementwise=True),
    "all_reduce_coalesced": Collective(
        ("inputs",), (), "reduce_op", returns_new=True, elementwise=True
    ),
    "all_reduce_coalesced_": Collective(
        ("inputs",), ("inputs",), "reduce_op", elementwise=True
    ),
    "all_gather_into_tensor": Collective(("input",), (), returns_new=True),
    "all_gather_into_tensor_out": Collective(("input",), ("out",)),
    "all_gather_into_tensor_coalesced": Collective(("inputs",), (), returns_new=True),
    "reduce_scatter_tensor": Collective(
        ("input",), (), "reduce_op", returns_new=True, scatters=True
    ),
    "reduce_scatter_tensor_coalesced": Collective(
        ("inputs",), (), "reduce_op", returns_new=True, scatters=True
    ),
    "reduce_scatter_tensor_out": Collective(
        ("input",), ("out",), "reduce_op", scatters=True
    ),
    "all_to_all_single": Collective(("input",), (), returns_new=True),
    "broadcast": Collective(("input",), (), returns_new=True, elementwise=True),
    "broadcast_": Collective(("input",), ("input",), elementwise=True),
    "wait_tensor": PASSES_THROUGH,
}

NAMESPACES = frozenset({"c10d", "_c10d_functional"})


def _ops(namespace: str, entries: dict) -> dict:
    """{OpOverload: entry} for the ops this torch has (older ones lack some)."""
    table = {}
    packets = getattr(torch.ops, namespace)
    for name, entry in entries.items():
        try:
            table[getattr(packets, name).default] = entry
        except (AttributeError, RuntimeError):
            continue
    return table


_TABLE: dict | None = None


def collective(op):
    """The table's entry for `op`, or None for a collective it does not know."""
    global _TABLE
    if _TABLE is None:
        _TABLE = {**_ops("c10d", _C10D), **_ops("_c10d_functional", _FUNCTIONAL)}
    entry = _TABLE.get(op)
    if entry is None and op.name().endswith("_wrap_tensor_autograd"):
        return PASSES_THROUGH  # (registered by torch's Python, later)
    return entry
