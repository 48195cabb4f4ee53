"""Reductions across ranks that are not linear: MAX, MIN and PRODUCT.

A linear reduction (SUM, AVG, PREMUL_SUM) of duals is the same reduction of
their tangents, so primal and tangent travel in one reduce (`dual.py`). MAX,
MIN and PRODUCT need every rank's value beside its tangent, so the duals are
all-gathered in one message and each rank reduces them itself, as the
single-process op over a stacked dimension would:

- MAX, MIN: the tangent of the element that wins; ties share it evenly (the
  JVP of `amax` / `amin`, as native's);
- PRODUCT: the product rule, sum_i t_i * prod_{j != i} x_j, with the products of
  the others taken as prefix and suffix products: exact where some x are zero.
Bitwise reductions have no derivative: a differentiable tensor is refused.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

LINEAR = frozenset({"sum", "avg", "premul_sum"})
BY_ELEMENT = frozenset({"max", "min", "product"})
BITWISE = frozenset({"band", "bor", "bxor"})


def kind_of(value) -> str:
    """The reduce kind, lower case: from a c10d ReduceOp (as the dispatcher hands
    it, a script object) or a functional collective's string."""
    if isinstance(value, str):
        return value.lower()
    code = value.op() if isinstance(value, torch.ScriptObject) else value
    if isinstance(code, dist.ReduceOp):
        code = code.op if hasattr(code, "op") else int(code)
    code = int(code)
    name = _NAMES.get(code)
    if name is None:
        name = _NAMES[code] = dist.ReduceOp.RedOpType(code).name.lower()
    return name


_NAMES: dict = {}  # RedOpType's code -> its name, lower case (on every collective)


def reduced(kind: str, values: torch.Tensor, tangents: torch.Tensor):
    """(value, tangent) of reducing `values` (ranks on dim 0) by `kind`."""
    if kind in ("max", "min"):
        value = values.amax(0) if kind == "max" else values.amin(0)
        wins = (values == value).to(tangents.dtype)
        tangent = (tangents * wins).sum(0) / wins.sum(0)
        return value, tangent
    if kind == "product":
        return values.prod(0), (tangents * _products_of_the_others(values)).sum(0)
    raise AssertionError(kind)


def _products_of_the_others(values: torch.Tensor) -> torch.Tensor:
    """For each rank i, the product of the values of every other rank."""
    ones = torch.ones_like(values[:1])
    before = torch.cat([ones, values[:-1].cumprod(0)])
    after = torch.cat([values[1:].flip(0).cumprod(0).flip(0), ones])
    return before * after
