"""Jagged nested tensors (`torch.nested`, layout=torch.jagged) as duals.

A jagged nested tensor is a tensor subclass wrapping one dense tensor, its values
(all components' rows stacked), with offsets saying where each component starts.
Its ops unwrap to ops on the values, partly in its `__torch_function__` (linear,
layer_norm, attention), partly in its `__torch_dispatch__`. So dualgen keeps a
nested tensor's tangent where those ops look: on its values. The tangent of a
jagged nested tensor is the nested tensor with the same offsets whose values are
the values' tangent. Every op the subclass runs on its values is then
differentiated by the aten rules, and no op on the wrapper can drop a tangent that
the wrapper itself held.

The mode therefore runs every op with a jagged argument as the subclass runs it
(`run`: its `__torch_dispatch__`, with the mode on the stack), with one exception:
the subclass reads its values through `detach`, which would drop their tangents,
so `values()` is taken as an alias here. Where autograd records, the mode lets
it record the ops on values too (mode.py), so tangents are differentiable.
"""

from __future__ import annotations

import functools

import torch

_VALUES_OPS = frozenset(
    {torch.ops.aten._nested_get_values.default, torch.ops.aten.values.default}
)


def is_jagged(value) -> bool:
    # (by type: reading `.layout` is itself an op the subclass dispatches)
    return isinstance(value, _nested_tensor_type())


@functools.cache
def _nested_tensor_type() -> type:
    from torch.nested._internal.nested_tensor import NestedTensor

    return NestedTensor


def any_jagged(args, kwargs) -> bool:
    for value in (*args, *kwargs.values()):
        if is_jagged(value):
            return True
        if isinstance(value, (list, tuple)) and any(is_jagged(v) for v in value):
            return True
    return False


def reads_values(func) -> bool:
    return func in _VALUES_OPS


def run(func, types, args, kwargs):
    """The op as the jagged subclass runs it (the caller has the mode on the
    stack, so the ops it runs on values reach the mode)."""
    for value in (*args, *kwargs.values()):
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if is_jagged(v):
                return type(v).__torch_dispatch__(func, types, args, kwargs)
    raise AssertionError("no jagged nested tensor among the arguments")


def values_alias(nested: torch.Tensor) -> torch.Tensor:
    """`nested.values()` as a view of the values that keeps their tangents (the
    caller runs it with the mode on the stack)."""
    return torch.ops.aten.alias.default(nested._values)


def with_values(nested: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A jagged nested tensor with `nested`'s offsets, lengths, ragged dimension and
    sequence-length bounds, and `values` (same shape) as its values: a view of
    `values` for autograd (torch's own constructor of views), so gradients reach
    what `values` was computed from."""
    from torch.nested._internal.nested_tensor import _nt_view_dummy

    cache = nested._metadata_cache
    return torch._nested_view_from_jagged(
        values,
        nested._offsets,
        _nt_view_dummy(),
        nested._lengths,
        nested._ragged_idx,
        cache.get("min_seqlen"),
        cache.get("max_seqlen"),
    )


def check_same_structure(nested: torch.Tensor, tangent: torch.Tensor) -> None:
    """make_dual's check for a jagged primal: the tangent has the same components
    (offsets, lengths, ragged dimension) and values of the same shape."""
    if not is_jagged(tangent):
        raise RuntimeError(
            "Trying to set a forward gradient on a jagged nested tensor with a tangent "
            f"that is not one (layout {tangent.layout}); give a nested tensor with the "
            "primal's offsets (torch.nested.nested_tensor_from_jagged(values, "
            "primal.offsets()))"
        )
    same = (
        tangent._ragged_idx == nested._ragged_idx
        and tangent._values.shape == nested._values.shape
        and _same_index(tangent._offsets, nested._offsets)
        and _same_index(tangent._lengths, nested._lengths)
    )
    if not same:
        raise RuntimeError(
            "Trying to set a forward gradient on a jagged nested tensor whose "
            "components differ from the primal's: the tangent must have the same "
            f"offsets, lengths and ragged dimension (primal values {list(nested._values.shape)}, "
            f"tangent values {list(tangent._values.shape)})"
        )


def _same_index(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a.shape == b.shape and bool(torch.equal(a.cpu(), b.cpu())))
