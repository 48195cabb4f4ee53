"""Giving a non-in-place op's outputs their tangents.

Each output gets the tangent its rule computed, in the dtype and layout native
would give it; a tangent that is an input's tangent is stored as a copy.
"""

from __future__ import annotations

import torch

from ..dtypes import in_dtype_of
from ..layout import conform_layout
from ..levels import Level, set_tangent
from ..nested_layout import same_shape, shape_text
from ..rules.rule import Rule
from ..tangents import is_differentiable_dtype


def shared_with_inputs(results, tangents) -> tuple[bool, ...] | None:
    """Which output tangents of a non-view op alias an input's tangent (a formula
    that reduced to `self_t`, or `conform(self_t)`, once its other terms were
    dropped): they are stored as copies, laid out as native lays out the tangent
    it is given (`conform_layout(..., fresh=True)`); otherwise an in-place op on
    the output, or on the input, would also write into the other's tangent.
    Native gives such outputs fresh tangents too. None: no input has a tangent
    tensor. Identity and `_base` checks only: this runs on every op."""
    roots = {
        id(t if t._base is None else t._base)
        for t in tangents
        if isinstance(t, torch.Tensor)
    }
    if not roots:
        return None
    return tuple(
        isinstance(v, torch.Tensor) and id(v if v._base is None else v._base) in roots
        for v in results
    )


def attach_outputs(rule: Rule, level: Level, outputs, results, promote, shared) -> None:
    """Give each output its tangent (`shared[i]`: result i is an input's tangent,
    stored as a copy)."""
    for i, (output, value, differentiable) in enumerate(
        zip(outputs, results, rule.differentiable_outputs)
    ):
        if isinstance(output, (list, tuple)):
            for o, v in zip(output, value or [None] * len(output)):
                _attach_one(rule, level, o, v if differentiable else None, promote)
        else:
            fresh = shared is not None and shared[i]
            value = value if differentiable else None
            _attach_one(rule, level, output, value, promote, fresh)


def _attach_one(
    rule: Rule, level: Level, output, value, promote, fresh: bool = False
) -> None:
    if not isinstance(output, torch.Tensor):
        return
    if value is None or not is_differentiable_dtype(output):
        if rule.kind == "view" or output._base is not None:
            set_tangent(output, level, None)  # a non-differentiable view (detach)
        return
    if not same_shape(value, output):
        raise RuntimeError(
            f"JVP rule for {rule.op} ({rule.origin}) returned a tangent of shape "
            f"{shape_text(value)} for an output of shape {shape_text(output)}"
        )
    if rule.kind != "view":
        if promote:
            value = in_dtype_of(value, output)
        value = conform_layout(value, output, fresh)
    set_tangent(output, level, value)
