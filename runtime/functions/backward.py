"""Custom Functions on the reverse tape (the gradcheck harness's backward mode).

forward runs with grad mode off, so a tape alone would record its aten ops as
constants (a zero gradient), and what the user wrote for reverse mode, `backward`
or `vjp`, is no aten op. So while a tape records, `Function.apply` is hooked as
for dual levels, and the C++ apply that `_apply` runs (`native_apply`) catches the
ctx and puts one `FunctionStep` on each recording tape that differentiates one of
the inputs, before any jvp runs (so a tape sees a jvp's use of the outputs).

Running backwards, the step calls the ctx's `backward`/`vjp` as autograd's engine
does: missing grads as zeros (unless `ctx.set_materialize_grads(False)`),
`ctx.saved_tensors` what save_for_backward got (as it was then: the tape copies
saved tensors before they are written to), `ctx.needs_input_grad` true for the
inputs the tape differentiates (in forward and setup_context too), the result
checked and a broadcast gradient summed as the engine does. Its aten ops run
outside the tape, so an enclosing tape or dual level differentiates them
(gradgradcheck), unless it is @once_differentiable: as native, its results then
carry no derivative, not even a tangent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from .attach import marked_non_differentiable
from .call import (
    CAPTURE,
    NEEDS_INPUT_GRAD,
    RAW,
    TAPE_NEEDS,
    Call,
    bound_inputs,
    materializes,
    record_of,
)
from .derived import ONCE_DIFFERENTIABLE_CODE, user_backward
from .user_rules import transparent_for

_C_APPLY = torch._C._FunctionBase.__dict__["apply"]


class _Tapes(threading.local):
    def __init__(self) -> None:
        self.recording: list = []  # this thread's recording tapes, innermost last


TAPES = _Tapes()


@dataclass
class FunctionStep:
    """One `cls.apply` on a tape: its ctx, and its values' nodes."""

    ctx: object
    name: str
    saved: list  # what save_for_backward got, as the tape's _Saved
    outputs: list  # per output: (shape, dtype, device) of a tensor, else None
    input_nodes: list  # per forward input: its node, or None
    output_nodes: list  # per output: its node, or None
    tensor_inputs: tuple  # per forward input: whether it is a tensor


# --------------------------------------------------------------------------------------
# recording


def native_apply(cls, *args, **kwargs):
    """The C++ `_FunctionBase.apply`, plus a step on each recording tape that
    differentiates one of the inputs (in grad mode, as autograd records)."""
    tapes = TAPES.recording
    if not tapes or not torch.is_grad_enabled():
        return _C_APPLY.__get__(None, cls)(*args, **kwargs)
    plain = transparent_for(cls)
    if plain is not None:
        return plain(*args, **kwargs)  # run as plain code: the tapes see its ops
    inputs = bound_inputs(Call(cls, args, kwargs, [], True))
    watching = []  # (tape, the inputs' nodes on it)
    for tape in tapes:
        nodes = [_node(tape, x) for x in inputs]
        if any(n is not None for n in nodes):
            watching.append((tape, nodes))
    if not watching:
        return _C_APPLY.__get__(None, cls)(*args, **kwargs)
    needs = tuple(
        any(nodes[i] is not None for _, nodes in watching) for i in range(len(inputs))
    )
    frame = [cls._backward_cls, None, needs]  # caught by hooks._ctx_init
    CAPTURE.pending.append(frame)
    try:
        outputs = _C_APPLY.__get__(None, cls)(*args, **kwargs)
    finally:
        CAPTURE.pending.pop()
    ctx = frame[1]
    if ctx is None:
        raise RuntimeError(
            f"dualgen: no autograd context was created for {cls.__name__}"
        )
    ctx.__dict__.pop(TAPE_NEEDS, None)
    for tape, nodes in watching:
        _add_step(tape, cls, ctx, inputs, nodes, outputs)
    return outputs


def _node(tape, x):
    if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
        return tape._node_of(x)
    return None


def _add_step(tape, cls, ctx, inputs: tuple, nodes: list, outputs) -> None:
    """The step, then the outputs' new nodes on `tape`: an input marked dirty, or
    new memory, now holds its node; a view of an input is a new value itself."""
    record = record_of(ctx)
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    nondiff = record.non_differentiable or ()
    output_nodes = [
        (
            tape._new_node(o)
            if isinstance(o, torch.Tensor)
            and (o.is_floating_point() or o.is_complex())
            and not marked_non_differentiable(o, nondiff, inputs)
            else None
        )
        for o in outs
    ]
    saved = [tape._save(t) for t in record.to_save or ()]
    metas = [
        (o.shape, o.dtype, o.device) if isinstance(o, torch.Tensor) else None
        for o in outs
    ]
    tensors = tuple(isinstance(x, torch.Tensor) for x in inputs)
    tape._steps.append(
        FunctionStep(ctx, cls.__name__, saved, metas, nodes, output_nodes, tensors)
    )
    dirty = record.dirty_tensors or ()
    memory = {x.untyped_storage()._cdata for x in inputs if isinstance(x, torch.Tensor)}
    for out, node in zip(outs, output_nodes):
        if not isinstance(out, torch.Tensor):
            continue
        if any(out is d for d in dirty) or out.untyped_storage()._cdata not in memory:
            tape._write(out, node)
        else:
            tape._add_output(out, node)


# --------------------------------------------------------------------------------------
# running backwards


def backward(tape, step: FunctionStep, cotangents: dict, undefined: bool) -> None:
    """Run `step` backwards: the user's backward on its outputs' cotangents."""
    grads = [
        cotangents.pop(n, None) if n is not None else None for n in step.output_nodes
    ]
    if all(g is None for g in grads):
        return
    results = _call(step, _materialized(step, grads, undefined))
    # As native's @once_differentiable wrapper: results without derivatives.
    cut = torch.is_grad_enabled() and _once_differentiable(step)
    for i, node, g in _checked(step, results):
        shape = tape._node_meta[node][0]
        if g.shape != shape and _expandable(shape, g):
            g = g.sum_to_size(shape)  # as the engine reduces a broadcast gradient
        g = g.detach() if cut else g
        tape._accumulate(cotangents, node, g, f"{step.name}Backward for input {i}")


def _materialized(step: FunctionStep, grads: list, undefined: bool) -> list:
    """Zeros for missing grads (tensor outputs), unless the ctx does not
    materialize them: then None also for zero ones that stand for undefined
    gradients (`undefined`, gradcheck's check_undefined_grad)."""
    if not materializes(step.ctx):
        if undefined:
            return [g if g is None or g.count_nonzero() else None for g in grads]
        return grads
    return [
        (
            torch.zeros(meta[0], dtype=meta[1], device=meta[2])
            if g is None and meta is not None
            else g
        )
        for g, meta in zip(grads, step.outputs)
    ]


def _call(step: FunctionStep, grads: list):
    """backward(ctx, *grads) (or vjp) as the engine calls it."""
    ctx = step.ctx
    needs = NEEDS_INPUT_GRAD.__get__(ctx)
    NEEDS_INPUT_GRAD.__set__(ctx, tuple(n is not None for n in step.input_nodes))
    RAW["saved_for_forward"].__set__(ctx, tuple(_value(s) for s in step.saved))
    try:
        return ctx.apply(*grads)  # BackwardCFunction.apply
    finally:
        RAW["saved_for_forward"].__set__(ctx, None)
        NEEDS_INPUT_GRAD.__set__(ctx, needs)


def _checked(step: FunctionStep, results):
    """(input position, node, gradient) to accumulate, after the engine's checks
    of what backward returned (its messages)."""
    results = _as_tuple(results)
    expected = len(step.input_nodes)
    if len(results) < expected or any(r is not None for r in results[expected:]):
        raise RuntimeError(
            f"function {step.name}Backward returned an incorrect number of gradients "
            f"(expected {expected}, got {len(results)})"
        )
    for i, (node, g) in enumerate(zip(step.input_nodes, results)):
        if g is not None and not isinstance(g, torch.Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
        if g is not None and not step.tensor_inputs[i]:
            raise RuntimeError(
                f"function {step.name}Backward returned a gradient different than "
                f"None at position {i + 1}, but the corresponding forward input was "
                f"not a Variable"
            )
        if g is not None and node is not None:
            yield i, node, g


def _once_differentiable(step: FunctionStep) -> bool:
    backward = user_backward(step.ctx._forward_cls)
    return getattr(backward, "__code__", None) is ONCE_DIFFERENTIABLE_CODE


def _as_tuple(results) -> tuple:
    return results if isinstance(results, tuple) else (results,)


def _expandable(shape, g: torch.Tensor) -> bool:
    try:
        return torch.broadcast_shapes(shape, g.shape) == g.shape
    except RuntimeError:
        return False


def _value(saved):
    return getattr(saved, "value", saved)  # a tape's _Saved, or None
