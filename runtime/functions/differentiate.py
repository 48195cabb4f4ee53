"""One level: the outputs' tangents at a level from a registered rule, the
Function's jvp or the jvp derived from backward, given what native gives jvp."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import _SingleLevelFunction

from ..levels import Level
from ..tangents import is_differentiable_dtype, remember_saved_outputs, tangent_of
from .attach import attach
from .call import RAW, Call, Record, materializes, record_of
from .custom_ops import op_rule, op_rule_tangents
from .derived import derived_jvp
from .user_rules import RULES


def differentiate(call: Call, ctx, level: Level, outputs) -> None:
    """Output tangents at `level` from the rule, jvp or the derived jvp."""
    tangents = [
        (
            tangent_of(x, level)
            if isinstance(x, torch.Tensor) and is_differentiable_dtype(x)
            else None
        )
        for x in call.inputs
    ]
    versions = [t._version if t is not None else None for t in tangents]
    outs = as_tuple(outputs)
    record = record_of(ctx)
    rule = RULES.get(call.cls)
    if rule is None and has_jvp(call.cls):
        rule = call.cls.jvp
    of_op = op_rule(call.cls) if rule is None else None
    if rule is not None:
        given = _materialized(call, ctx, tangents)
        results = _results(_call_with_saved(rule, ctx, record, given), len(outs))
        derived = False
    elif of_op is not None:  # a custom op's Function: the op's own rule
        results = op_rule_tangents(*of_op, call.inputs, level, outs)
        derived = False
    else:
        results = derived_jvp(call, ctx, record, tangents, outs)
        derived = True
    for i, (out, value) in enumerate(zip(outs, results)):
        attach(call, level, record, tangents, versions, i, out, value, derived)
    if call.grad_enabled and any(
        t.requires_grad for t in (*call.scan, *_tensors(tangents))
    ):
        remember_saved_outputs(level, outs)


def _materialized(call: Call, ctx, tangents: list) -> list:
    """What native passes to jvp: zeros for a floating point or complex tensor
    input without tangent, unless `ctx.set_materialize_grads(False)` was called."""
    if not materializes(ctx):
        return tangents
    return [
        (
            torch.zeros_like(x)
            if t is None and isinstance(x, torch.Tensor) and is_differentiable_dtype(x)
            else t
        )
        for x, t in zip(call.inputs, tangents)
    ]


def has_jvp(cls: type) -> bool:
    return cls.jvp is not _SingleLevelFunction.jvp


def as_tuple(outputs) -> tuple:
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _tensors(values) -> list:
    return [v for v in values if isinstance(v, torch.Tensor)]


def _call_with_saved(fn: Callable, ctx, record: Record, tangents: list):
    """jvp(ctx, *tangents) with `ctx.saved_tensors` what save_for_forward got (as
    native: () if it was not called)."""
    saved = RAW["saved_for_forward"]
    saved.__set__(ctx, record.saved_for_forward or ())
    try:
        return fn(ctx, *tangents)
    finally:
        saved.__set__(ctx, None)


def _results(value, expected: int) -> tuple:
    """jvp's return value as a tuple, checked as native checks it."""
    results = value if isinstance(value, tuple) else (value,)
    if len(results) != expected:
        raise RuntimeError(
            "Function's jvp returned an invalid number of forward gradients "
            f"(expected {expected} but got {len(results)})"
        )
    for i, r in enumerate(results):
        if r is not None and not isinstance(r, torch.Tensor):
            raise RuntimeError(
                f"expected Variable or None (got {type(r).__name__}) for grad output "
                f"{i}."
            )
    return results
