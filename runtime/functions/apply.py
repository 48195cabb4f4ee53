"""The patched apply: the innermost level with tangents, the levels below it
first (nested levels), the primal run with no level handled, and forward's inputs
as the C++ apply binds them."""

from __future__ import annotations

from typing import Any

import torch

from ..levels import STATE, Level
from ..tangents import handling_levels_below, is_differentiable_dtype, tangent_of
from .backward import native_apply as _native_apply  # C++ apply, + tape steps
from .call import (
    CAPTURE,
    NEEDS_INPUT_GRAD,
    RECORD,
    Call,
    Record,
    bound_inputs,
    has_setup_context,
    record_of,
)
from .differentiate import as_tuple, differentiate, has_jvp
from .series import apply_on_series, takes_series
from .user_rules import transparent_for

# --------------------------------------------------------------------------------------
# apply


def apply_with_levels(cls, *args, **kwargs):
    """`_FunctionBase.apply` while levels are active (see the package docstring):
    `Function.apply` has bound setup_context's defaults and checked for functorch."""
    if takes_series(args, kwargs):  # Taylor mode (series.py)
        return apply_on_series(
            cls, lambda *a, **k: _native_apply(cls, *a, **k), args, kwargs
        )
    if (
        STATE.cap < 0  # no level handled: inside a forward, or level 0's rules
        or not torch._C._is_fwd_grad_enabled()
        or torch._C._are_functorch_transforms_active()
    ):
        return _native_apply(cls, *args, **kwargs)
    plain = transparent_for(cls)
    if plain is not None:
        # Even without input tangents: its function may read tensors with
        # tangents from its closure (a model's parameters), which native drops.
        return plain(*args, **kwargs)
    scan = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    level = _innermost_level(scan, STATE.cap)
    if level is None:
        # Like native: forward sees no tangent (closure tensors included).
        with handling_levels_below(STATE.levels[0], STATE.mode):
            return _native_apply(cls, *args, **kwargs)
    call = Call(cls, args, kwargs, scan, torch.is_grad_enabled())
    outputs, _ = _apply_at(call, level)
    return outputs


def _innermost_level(tensors: list, top: int) -> Level | None:
    """The innermost level up to index `top` at which a tensor has a tangent."""
    for level in reversed(STATE.levels[: top + 1]):
        for t in tensors:
            if is_differentiable_dtype(t) and tangent_of(t, level) is not None:
                return level
    return None


def _apply_at(call: Call, level: Level) -> tuple[Any, Any]:
    """Outputs with tangents at `level` and the lower levels; and the C++ ctx."""
    lower = _innermost_level(call.scan, level.index - 1)
    with handling_levels_below(level, STATE.mode):
        if lower is None:
            outputs, base_ctx = _run_primal(call)
            ctx = base_ctx
        else:
            outputs, base_ctx = _apply_at(call, lower)
            ctx = _ctx_for_outer_level(call, base_ctx, outputs)
        differentiate(call, ctx, level, outputs)
    return outputs, base_ctx


def _run_primal(call: Call) -> tuple[Any, Any]:
    """The native apply with no level handled (forward sees no tangent), catching
    the ctx it creates."""
    frame = [call.cls._backward_cls, None]
    CAPTURE.pending.append(frame)
    try:
        with handling_levels_below(STATE.levels[0], STATE.mode):
            outputs = _native_apply(call.cls, *call.args, **call.kwargs)
    finally:
        CAPTURE.pending.pop()
    ctx = frame[1]
    if ctx is None:
        raise RuntimeError(f"dualgen: no autograd context was created for {call.name}")
    call.inputs = bound_inputs(call)
    if len(call.inputs) != len(NEEDS_INPUT_GRAD.__get__(ctx)):
        raise RuntimeError(
            f"dualgen: could not match {call.name}'s inputs to forward's arguments"
        )
    return outputs, ctx


# --------------------------------------------------------------------------------------
# nested levels


def _ctx_for_outer_level(call: Call, base_ctx, outputs):
    """The ctx for a level with tangents also below it. What jvp reads must carry
    the lower levels' tangents: with setup_context, it runs again (grad off, as
    native, lower levels handled) on the inputs and the outputs, which carry them.
    A forward(ctx, ...) cannot run again, so everything it left for jvp must be
    inputs or outputs (tensors computed inside forward carry no tangent)."""
    cls = call.cls
    if has_setup_context(cls):
        ctx = cls._backward_cls()
        ctx.__dict__[RECORD] = Record()
        NEEDS_INPUT_GRAD.__set__(ctx, NEEDS_INPUT_GRAD.__get__(base_ctx))
        with torch.no_grad():
            cls.setup_context(ctx, call.inputs, outputs)
        return ctx
    record = record_of(base_ctx)
    known = {id(t) for t in (*call.inputs, *as_tuple(outputs))}
    left = [*(record.saved_for_forward or ()), *base_ctx.__dict__.values()]
    if not has_jvp(cls):
        left.extend(record.to_save or ())
    for value in left:
        if (
            isinstance(value, torch.Tensor)
            and is_differentiable_dtype(value)  # (indices carry no tangent anyway)
            and id(value) not in known
        ):
            raise NotImplementedError(
                f"{call.name}: with nested dual levels, dualgen differentiates its "
                f"jvp at the outer levels, but forward(ctx, ...) left a tensor "
                f"computed inside forward on ctx, which carries no outer-level "
                f"tangent. Define setup_context (compute what jvp needs there from "
                f"inputs and output) instead of taking ctx in forward, as torch.func "
                f"requires."
            )
    return base_ctx
