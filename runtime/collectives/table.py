"""What each collective reads and writes, by argument name: the spec's
`collective:` entries (derivatives.yaml, generated into
dualgen.generated.collectives).

torch.distributed's process-group calls reach the dispatcher as `c10d::` ops that
write into tensors they are given (their schemas do not say so); the functional
collectives (`_c10d_functional::`) return new tensors, waited for by
`wait_tensor`. Each entry says which arguments a collective sends and receives
(a tensor, a list of them, or a list of lists) and which holds the reduce kind;
the forward-AD rule of every linear collective follows from that alone
(`dual.py`).
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


def _entry(fields: dict):
    """The runtime's form of a generated row (generated/collectives.py)."""
    packing = fields["packing"]
    if packing == "passes_through":
        return PASSES_THROUGH
    if packing == "no_data":
        return NO_DATA
    return Collective(
        reads=fields.get("sends", ()),
        writes=fields.get("receives", ()),
        reduce=fields.get("reduce"),
        returns_new=fields.get("returns_new", False),
        scatters=fields.get("scatters", False),
        root=fields.get("root"),
        elementwise=packing == "element_wise",
    )


NAMESPACES = frozenset({"c10d", "_c10d_functional"})


def _ops(rows: dict) -> dict:
    """{OpOverload: entry} for the collectives of the spec this torch has."""
    table = {}
    for name, fields in rows.items():
        namespace, _, op_name = name.partition("::")
        packet_name, _, overload = op_name.partition(".")
        try:
            packet = getattr(getattr(torch.ops, namespace), packet_name)
            table[getattr(packet, overload or "default")] = _entry(fields)
        except (AttributeError, RuntimeError):
            continue
    return table


_TABLE: dict | None = None


def collective(op):
    """The table's entry for `op`, or None for a collective it does not know."""
    global _TABLE
    if _TABLE is None:
        from dualgen.generated.collectives import COLLECTIVES

        _TABLE = _ops(COLLECTIVES)
    entry = _TABLE.get(op)
    if entry is None and op.name().endswith("_wrap_tensor_autograd"):
        return PASSES_THROUGH  # (registered by torch's Python, later)
    return entry
