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


def component_sizes(t: torch.Tensor) -> list[list[int]]:
    """Each component's shape (a strided nested tensor's stand-in for `.shape`)."""
    return torch.ops.aten._nested_tensor_size(t).tolist()


def same_components(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Whether `tangent` is a strided nested tensor with `primal`'s components'
    shapes."""
    return (
        is_strided_nested(tangent)
        and tangent.size(0) == primal.size(0)
        and tangent.dim() == primal.dim()
        and component_sizes(tangent) == component_sizes(primal)
    )


def shape_text(t: torch.Tensor) -> str:
    """For error messages: a shape, or a nested tensor's components' shapes."""
    if t.is_nested and t.layout is torch.strided:
        return f"nested {component_sizes(t)}"
    return str(list(t.shape))
