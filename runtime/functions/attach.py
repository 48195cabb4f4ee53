"""Attaching the outputs' tangents, with native's checks: non-differentiable,
in-place (mark_dirty) and view outputs."""

from __future__ import annotations

import torch

from ..layout import conform_layout, set_new_tangent
from ..levels import Level, set_tangent, view_of_tangent
from ..tangents import is_differentiable_dtype
from .call import Call, Record


def _root(t: torch.Tensor) -> torch.Tensor:
    return t if t._base is None else t._base


def _viewed_input(inputs: tuple, out: torch.Tensor) -> int | None:
    """The first input that a view output shares its base with (native matches
    forward-view bases the same way); None for an output that is no view."""
    if out._base is None:
        return None
    root = out._base
    for j, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and _root(x) is root:
            return j
    return None


def marked_non_differentiable(out: torch.Tensor, nondiff, inputs: tuple) -> bool:
    """Whether forward gave `out` to mark_non_differentiable. An input returned
    as-is comes back from autograd as `input.view_as(input)` (or detached): it is
    matched to that input by its memory and geometry."""
    if not nondiff:
        return False
    if any(t is out for t in nondiff):
        return True
    if out.layout != torch.strided:
        return False
    for x in inputs:
        if (
            isinstance(x, torch.Tensor)
            and any(t is x for t in nondiff)
            and x.layout == torch.strided
            and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            and out.storage_offset() == x.storage_offset()
            and out.shape == x.shape
            and out.stride() == x.stride()
            and out.dtype == x.dtype
        ):
            return True
    return False


def attach(
    call: Call,
    level: Level,
    record: Record,
    tangents: list,
    versions: list,
    i: int,
    out,
    value: torch.Tensor | None,
    derived: bool,
) -> None:
    """Give output `i` its tangent `value` at `level`, with native's checks for
    non-differentiable, in-place (mark_dirty) and view outputs."""
    if not isinstance(out, torch.Tensor):
        return  # native ignores a tangent for a non-tensor output
    nondiff = record.non_differentiable or ()
    if not is_differentiable_dtype(out) or marked_non_differentiable(
        out, nondiff, call.inputs
    ):
        if value is not None:
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but  the "
                "corresponding forward output is not a differentiable Tensor.You "
                "should return None at that position instead."
            )
        # Native leaves it alone: a non-differentiable view of an input (or an
        # input returned as-is) still sees the input's tangent through its base.
        return
    inputs = call.inputs
    if any(out is t for t in record.dirty_tensors or ()):
        k = next((j for j, x in enumerate(inputs) if x is out), None)
        if k is None:
            raise RuntimeError(
                "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor "
                "is not an input, there is no need to pass it to mark_dirty()."
            )
        _attach_inplace(call, level, i, out, tangents[k], versions[k], value, derived)
        return
    k = _viewed_input(inputs, out)
    if k is not None:
        _attach_view(call, level, i, out, inputs[k], tangents[k], value, derived)
        return
    if value is None:
        if out._base is not None:
            set_tangent(out, level, None)
        return
    _check_tangent(call, i, out, value)
    # In the output's layout, as native's _set_fw_grad (a copy only where the
    # strides differ: a jvp returning its input's tangent shares it, as native).
    set_tangent(out, level, conform_layout(value, out))


def _attach_inplace(
    call: Call, level: Level, i: int, out, tangent, version, value, derived: bool
) -> None:
    """An input modified in place: its tangent must be modified in place and
    returned as-is (native's checks); an input without one gets `value`."""
    if tangent is None:
        if value is not None:
            _check_tangent(call, i, out, value)
            set_new_tangent(out, level, value)
        return
    if derived:
        tangent.copy_(value if value is not None else torch.zeros_like(tangent))
        return
    if value is None or value._version == version:
        raise RuntimeError(
            "An inplace custom Function is not modifying the forward mode gradients "
            "inplace. If the forward is modifying an input inplace, then the jvp "
            "function must modify the corresponding gradient inplace."
        )
    if value is not tangent:
        raise RuntimeError(
            "An inplace custom Function is not returning the forward mode gradients "
            "as-is. If the forward is modifying an input inplace, then the jvp "
            "function must modify the gradient inplace and return it as-is."
        )


def _attach_view(
    call: Call, level: Level, i: int, out, source, tangent, value, derived: bool
) -> None:
    """An output that is a view of an input (or the input as-is): its tangent must
    be a view of the input's tangent (native's checks). A derived jvp uses the same
    view of the input's tangent, as for any view."""
    if tangent is None:
        if value is not None:
            _check_tangent(call, i, out, value)
            set_new_tangent(out, level, value)
        else:
            set_tangent(out, level, None)
        return
    if derived:
        set_tangent(out, level, view_of_tangent(tangent, out, source))
        return
    if value is None or value._base is None:
        raise RuntimeError(
            "A custom Function's forward is returning a view (or an input as-is) but "
            "the jvp is not returning a view."
        )
    if tangent._base is not None:
        if value._base is not tangent._base:
            raise RuntimeError(
                "A custom Function is returning a view but the jvp is not returning a "
                "view of the same base as the given grad input."
            )
    elif value._base is not tangent:
        raise RuntimeError(
            "A custom Function is returning a view but the jvp is not returning a "
            "view of the given grad input."
        )
    _check_tangent(call, i, out, value)
    set_tangent(out, level, value)


def _check_tangent(call: Call, i: int, out: torch.Tensor, value: torch.Tensor):
    if not is_differentiable_dtype(value):
        raise RuntimeError(
            f"{call.name}'s jvp returned a {value.dtype} tangent for output {i}: "
            "Expected both tensor and its forward grad to be floating point or complex"
        )
    if value.shape != out.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of "
            f"the original Tensor, this is not supported. Tensor is of size "
            f"{list(out.shape)} while the given forward gradient is of size "
            f"{list(value.shape)}."
        )
