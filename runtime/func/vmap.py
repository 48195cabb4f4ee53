"""dualgen.func under torch.func's transforms: torch.vmap works, the others are refused.

functorch runs a batched op as the same op on the whole ("physical") tensors, with
its own levels popped, and that is what dualgen's dispatch mode sees. So under
`torch.vmap` a dual is made of the physical primal and tangent (each batch
dimension moved to the front, an input not batched at a level expanded along it),
then wrapped back as batched at the same levels: the function's ops reach the mode
as ops on physical duals. An output is unwrapped the same way to read its tangent,
and its primal and tangent wrapped as the output was.

`torch.func.grad` (and jacrev, vjp, hessian, torch.func.jvp) differentiate through
tensor wrappers whose autograd records only the ops run at their level; the
tangents dualgen computes below it would be invisible to them, so dualgen.func
refuses to run inside them and says what to use instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch._C import _functorch as functorch

import dualgen.forward_ad as fwAD

__all__ = [
    "BatchLayer",
    "is_functorch_wrapped",
    "physical_duals",
    "refuse_batched_reverse",
    "refuse_differentiating_transforms",
    "unpack_output",
]

_DIFFERENTIATING = (functorch.TransformType.Grad, functorch.TransformType.Jvp)


def refuse_differentiating_transforms(api: str) -> None:
    """Raise if a torch.func transform other than vmap is active."""
    if functorch.maybe_current_level() is None:  # no transform at all: the usual
        return
    for interpreter in functorch.get_interpreter_stack() or ():
        if interpreter.key() in _DIFFERENTIATING:
            raise RuntimeError(
                f"dualgen.func.{api} cannot run inside torch.func.grad, jacrev, "
                "vjp, hessian or torch.func.jvp: functorch hides their levels from "
                "dispatch modes, where dualgen computes tangents, so they would not "
                "see how the tangents depend on their inputs. Differentiate "
                f"dualgen.func.{api}'s results with torch.autograd.grad instead "
                "(dualgen's tangents are differentiable: make the inputs require "
                "grad), or use dualgen.func.hessian / hvp for forward over reverse. "
                "torch.vmap is supported."
            )


def refuse_batched_reverse(api: str, tensors) -> None:
    """Raise if torch.vmap batches one of `tensors`, the inputs or outputs of the
    reverse half of hessian and hvp: torch.autograd.grad does not see through
    torch.vmap's batched tensors (torch itself raises, or the gradient would be
    taken as zero)."""
    if any(map(is_functorch_wrapped, tensors)):
        raise RuntimeError(
            f"dualgen.func.{api} cannot run under torch.vmap: its reverse half, "
            "torch.autograd.grad, does not see through torch.vmap's batched tensors. "
            f"Call dualgen.func.{api} once per batch element, or batch the "
            "tangents instead: dualgen.func.hessian(f)(x) @ v for several v at "
            "one x. dualgen.func.jvp and jacfwd work under torch.vmap."
        )


def is_functorch_wrapped(t: object) -> bool:
    return isinstance(t, torch.Tensor) and functorch.is_functorch_wrapped_tensor(t)


@dataclass(frozen=True)
class BatchLayer:
    """One torch.vmap level a tensor is batched at, and the batch dimension."""

    level: int
    bdim: int


def _refuse_grad_wrapper(t: torch.Tensor) -> None:
    if functorch.is_functorch_wrapped_tensor(t) and not functorch.is_batchedtensor(t):
        raise AssertionError("a differentiating transform's wrapper got past the check")


def _peel(t: torch.Tensor) -> tuple[torch.Tensor, tuple[BatchLayer, ...]]:
    """The physical tensor under t's torch.vmap wrappers, and the wrappers'
    layers, outermost (highest level) first."""
    layers = []
    while functorch.is_batchedtensor(t):
        layers.append(
            BatchLayer(functorch.maybe_get_level(t), functorch.maybe_get_bdim(t))
        )
        t = functorch.get_unwrapped(t)
    _refuse_grad_wrapper(t)
    return t, tuple(layers)


def _wrap(t: torch.Tensor, layers: tuple[BatchLayer, ...]) -> torch.Tensor:
    for layer in reversed(layers):  # innermost wrapper (lowest level) first
        t = functorch._add_batch_dim(t, layer.bdim, layer.level)
    return t


def _at_front(tensors: list[torch.Tensor]) -> tuple[list, tuple[BatchLayer, ...]]:
    """The physical tensors with one leading dimension per torch.vmap level any of
    them is batched at (the lowest level's first), each batch dimension moved
    there and a tensor not batched at a level expanded along it; and the layers
    to wrap them back, outermost (highest level) first, as `_peel` gives them."""
    layers: list[BatchLayer] = []
    while True:
        levels = [
            functorch.maybe_get_level(t)
            for t in tensors
            if functorch.is_batchedtensor(t)
        ]
        if not levels:
            break
        top = max(levels)
        unwrapped: list[torch.Tensor | None] = []
        size = 0
        for t in tensors:
            if functorch.is_batchedtensor(t) and functorch.maybe_get_level(t) == top:
                inner = functorch.get_unwrapped(t).movedim(
                    functorch.maybe_get_bdim(t), 0
                )
                size = inner.shape[0]
                unwrapped.append(inner)
            else:
                unwrapped.append(None)
        tensors = [
            inner if inner is not None else t.unsqueeze(0).expand(size, *t.shape)
            for t, inner in zip(tensors, unwrapped)
        ]
        layers.append(BatchLayer(top, 0))
    return tensors, tuple(layers)


def physical_duals(
    flat_primals: list[torch.Tensor], flat_tangents: list[torch.Tensor], level: int
) -> list[torch.Tensor]:
    """Duals at `level` of primals and tangents some of which torch.vmap batches:
    made of the physical tensors, wrapped back as batched at every level in play."""
    for t in (*flat_primals, *flat_tangents):
        _refuse_grad_wrapper(t)
    count = len(flat_primals)
    physical, layers = _at_front([*flat_primals, *flat_tangents])
    duals = []
    for primal, tangent in zip(physical[:count], physical[count:]):
        # An expanded primal repeats its memory: each batch element needs its own
        # tangent, which make_dual lays out like the primal.
        primal = primal.contiguous() if 0 in primal.stride() else primal
        duals.append(_wrap(fwAD.make_dual(primal, tangent, level=level), layers))
    return duals


def unpack_output(
    output: torch.Tensor, level: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """unpack_dual at `level` of an output torch.vmap may batch (its tangent, if
    any, batched as the output is)."""
    if not functorch.is_batchedtensor(output):
        return fwAD.unpack_dual(output, level=level)
    physical, layers = _peel(output)
    primal, tangent = fwAD.unpack_dual(physical, level=level)
    return _wrap(primal, layers), None if tangent is None else _wrap(tangent, layers)
