"""Where the tape's values lie: a tensor's geometry (shape, strides, offset; a
nested tensor's per component) and the real-dtype view of complex memory that
places a complex tensor and its real views in one coordinate system."""

from __future__ import annotations

import torch

from ..nested_layout import component_sizes, component_strides


def geometry(t: torch.Tensor) -> tuple:
    """Where and how t's elements lie in its memory."""
    if t.is_nested:  # (no single shape: each component's)
        return (
            "nested",
            shape_of(t),
            component_strides(t),
            tuple(torch.ops.aten._nested_tensor_storage_offsets(t).tolist()),
        )
    return (tuple(t.shape), t.stride(), t.storage_offset())


def shape_of(t: torch.Tensor):
    """t's shape; a nested tensor's components' shapes."""
    if t.is_nested:
        return ("nested", *component_sizes(t))
    return t.shape


def real_geometry(t: torch.Tensor) -> tuple:
    """t's geometry in elements of its real dtype: a complex tensor seen as its
    real view (a last dim of 2), so a float view of complex memory (view_as_real)
    and the complex tensor it views are placed in one coordinate system."""
    if t.is_nested:
        raise NotImplementedError(
            "the tape cannot follow a view of a nested tensor's memory"
        )
    shape, stride, offset = geometry(t)
    if not t.is_complex():
        return shape, stride, offset
    return (*shape, 2), (*(2 * s for s in stride), 1), 2 * offset


def real_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


def as_real(g: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(g.resolve_conj()) if g.is_complex() else g


def from_real(r: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.view_as_complex(r) if dtype.is_complex else r
