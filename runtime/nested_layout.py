"""Strided nested tensors (`torch.nested`, layout=torch.strided) as duals.

Such a tensor is a C++ tensor of components of different shapes, with no single
shape: `.shape` raises. Its tangent is a strided nested tensor with the same
components' shapes (`same_components`), and the rules run on both as on any
tensor. Jagged nested tensors are a tensor subclass whose tangents live on their
values instead (dispatch/jagged.py).
"""

from __future__ import annotations

import torch


def is_strided_nested(t: torch.Tensor) -> bool:
    return t.is_nested and t.layout is torch.strided


def component_sizes(t: torch.Tensor) -> tuple[tuple[int, ...], ...]:
    """Each component's shape (a strided nested tensor's stand-in for `.shape`)."""
    return tuple(map(tuple, torch.ops.aten._nested_tensor_size(t).tolist()))


def component_strides(t: torch.Tensor) -> tuple[tuple[int, ...], ...]:
    """Each component's strides."""
    return tuple(map(tuple, torch.ops.aten._nested_tensor_strides(t).tolist()))


def same_components(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Whether `tangent` is a strided nested tensor with `primal`'s components'
    shapes."""
    return (
        is_strided_nested(tangent)
        and tangent.size(0) == primal.size(0)
        and tangent.dim() == primal.dim()
        and component_sizes(tangent) == component_sizes(primal)
    )


def same_shape(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Whether `tangent` has `primal`'s shape (a nested one's: its components')."""
    if primal.is_nested or tangent.is_nested:
        return same_components(tangent, primal)
    return tangent.shape == primal.shape


def shape_text(t: torch.Tensor) -> str:
    """For error messages: a shape, or a nested tensor's components' shapes."""
    if t.is_nested and t.layout is torch.strided:
        return f"nested {[list(c) for c in component_sizes(t)]}"
    return str(list(t.shape))
