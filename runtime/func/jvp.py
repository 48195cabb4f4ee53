"""The Jacobian-vector product every transform of `dualgen.func` is built on.

`jvp_with_argnums(func, primals, tangents, argnums)` checks its arguments as
torch.func.jvp does; `flat_jvp` then enters a new (possibly nested)
`dualgen.forward_ad` level, makes duals of the differentiated primals, calls `func`
and unpacks each output at that level: an output without a tangent there gets
zeros. jacfwd calls `flat_jvp` directly, its tangents (the basis) made to fit. Nesting transforms nests
levels, so an outer level differentiates an inner transform's computation.

jacfwd batches its tangents with torch's legacy vmap, which dualgen takes for the tangent of a plain primal. A transform nested inside
such a pass would make a dual of a tensor whose outer tangent is batched, which the
legacy vmap cannot alias; it raises `Unbatchable` at once instead, and the pass is
redone one column at a time (`jacobian.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten

import dualgen.forward_ad as fwAD

from . import checks
from .vmap import (
    is_functorch_wrapped,
    physical_duals,
    refuse_differentiating_transforms,
    unpack_output,
)

__all__ = [
    "ArgNums",
    "FlatJvp",
    "Unbatchable",
    "batched_pass",
    "check_not_in_batched_pass",
    "flat_jvp",
    "jvp_with_argnums",
]

ArgNums = int | tuple[int, ...]


class Unbatchable(Exception):
    """A dualgen.func transform started inside a pass of jacfwd whose tangents
    are batched: the pass must be redone without batching."""


class _PassState(threading.local):
    def __init__(self) -> None:
        self.batched_depth = 0  # how many batched jacfwd passes are running


_PASSES = _PassState()


class batched_pass:
    """Marks the running of a function with batched tangents (jacfwd's passes):
    a transform started inside raises `Unbatchable`."""

    def __enter__(self) -> None:
        _PASSES.batched_depth += 1

    def __exit__(self, *exc) -> None:
        _PASSES.batched_depth -= 1


def check_not_in_batched_pass() -> None:
    if _PASSES.batched_depth:
        raise Unbatchable()


def make_duals(
    flat_primals: list[torch.Tensor], flat_tangents: list[torch.Tensor], level: int
) -> list[torch.Tensor]:
    """Duals at `level`; under torch.vmap, of the physical tensors (`vmap.py`)."""
    if any(map(is_functorch_wrapped, (*flat_primals, *flat_tangents))):
        return physical_duals(flat_primals, flat_tangents, level)
    return [
        fwAD.make_dual(p, t, level=level) for p, t in zip(flat_primals, flat_tangents)
    ]


def primal_and_tangent(
    output: Any, level: int, strict: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """An output's primal and tangent at `level` (zeros if it has none)."""
    primal, tangent = unpack_output(output, level)
    if tangent is None:
        if strict:
            raise checks.strict_independent_output()
        tangent = torch.zeros_like(primal)
    return primal, tangent


@dataclass(frozen=True)
class FlatJvp:
    """What one run of func under a dual level gives, flat: each output leaf's
    primal and tangent, their structure, and aux (None without has_aux)."""

    primals: list[torch.Tensor]
    tangents: list[torch.Tensor]
    spec: TreeSpec
    aux: Any


def flat_jvp(
    func: Callable[..., Any],
    primals: tuple[Any, ...],
    argnums: ArgNums | None,
    diff: tuple[list[torch.Tensor], TreeSpec],
    flat_tangents: list[torch.Tensor],
    *,
    strict: bool = False,
    has_aux: bool = False,
    api: str = "jvp",
    batched: bool = False,
) -> FlatJvp:
    """func at `primals`, the differentiated ones (`diff`: `primals[argnums]`,
    or all for None, flattened, and their structure) dual with `flat_tangents`,
    already checked (jacfwd makes its own: the basis). `batched`: the tangents
    are batched by the legacy vmap (jacfwd's passes)."""
    refuse_differentiating_transforms(api)
    check_not_in_batched_pass()
    flat_primals, primals_spec = diff
    with fwAD._set_fwd_grad_enabled(True), fwAD.dual_level() as level:
        duals = tree_unflatten(
            make_duals(flat_primals, flat_tangents, level), primals_spec
        )
        if argnums is not None:
            duals = checks.replace_args(primals, duals, argnums)
        if batched:
            with batched_pass():
                result = func(*duals)
        else:
            result = func(*duals)
        aux = None
        if has_aux:
            result, aux = checks.split_aux(result, checks.JVP_API)
            checks.check_aux(aux)
        flat_outputs, outputs_spec = tree_flatten(result)
        checks.assert_non_empty_tensor_output(flat_outputs, checks.JVP_API)
        pairs = [primal_and_tangent(out, level, strict) for out in flat_outputs]
    return FlatJvp([p for p, _ in pairs], [t for _, t in pairs], outputs_spec, aux)


def jvp_with_argnums(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    argnums: ArgNums | None = None,
    *,
    strict: bool = False,
    has_aux: bool = False,
    api: str = "jvp",
) -> tuple[Any, ...]:
    """torch.func.jvp's result, `tangents` given for `primals[argnums]` only (for
    every primal when argnums is None; the others are passed as they are)."""
    checks.check_primals_tuple(primals)
    diff_args = primals if argnums is None else checks.slice_argnums(primals, argnums)
    flat_primals, primals_spec = tree_flatten(diff_args)
    flat_tangents, tangents_spec = tree_flatten(tangents)
    checks.check_same_structure(primals_spec, tangents_spec)
    checks.assert_non_empty_list_of_tensors(flat_primals, checks.JVP_API, "primals")
    checks.assert_non_empty_list_of_tensors(flat_tangents, checks.JVP_API, "tangents")
    out = flat_jvp(
        func,
        primals,
        argnums,
        (flat_primals, primals_spec),
        flat_tangents,
        strict=strict,
        has_aux=has_aux,
        api=api,
    )
    primals_out = tree_unflatten(out.primals, out.spec)
    tangents_out = tree_unflatten(out.tangents, out.spec)
    if has_aux:
        return primals_out, tangents_out, out.aux
    return primals_out, tangents_out
