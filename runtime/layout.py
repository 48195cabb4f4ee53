"""How a tangent is stored: laid out as native forward AD lays it out.

A tangent keeps its own layout when it matches its primal's (`same_layout`) and is
otherwise copied into memory laid out like the primal (`conform_layout`,
`laid_out_like`); a view given a new tangent stores it on its base
(`set_new_tangent`).
"""

from __future__ import annotations

import torch

from .levels import (
    Level,
    forward_base,
    own_tangent,
    set_tangent,
    view_of_tangent,
    with_lazy_bits,
)
from .tangents import autograd_enabled, tangent_of


def same_layout(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Native's test (`has_same_meta`) for keeping a tangent as it is: the same
    storage length, lazy bits and sizes, and, unless there are no elements, the
    same storage offset and strides (a dimension of size 1 has no stride that
    matters). The common case (equal strides and offset) first: this runs on
    every output."""
    shape = primal.shape
    if tangent.shape != shape:
        return False
    strides, primal_strides = tangent.stride(), primal.stride()
    offset = primal.storage_offset()
    if (strides != primal_strides or tangent.storage_offset() != offset) and (
        primal.numel() != 0
        and (
            tangent.storage_offset() != offset
            or not all(
                a == b or n == 1 for a, b, n in zip(strides, primal_strides, shape)
            )
        )
    ):
        return False
    if tangent.is_conj() != primal.is_conj() or tangent.is_neg() != primal.is_neg():
        return False
    nbytes, primal_nbytes = (
        tangent.untyped_storage().nbytes(),
        primal.untyped_storage().nbytes(),
    )
    if tangent.dtype == primal.dtype:
        return nbytes == primal_nbytes
    return nbytes * primal.element_size() == primal_nbytes * tangent.element_size()


def conform_layout(
    tangent: torch.Tensor, primal: torch.Tensor, fresh: bool = False
) -> torch.Tensor:
    """The tangent as native forward AD stores it: kept as it is when it has the
    primal's layout (`same_layout`); otherwise copied into a new tensor of the
    primal's dtype, layout and bits (views of it then match views of the
    primal). `fresh`: the tangent is another tensor's, so one that would be kept
    is copied into new memory of the same layout and dtype instead."""
    keep = same_layout(tangent, primal)
    if keep and not fresh:
        return tangent
    dtype = tangent.dtype if keep else primal.dtype
    with autograd_enabled():  # from make_dual; a no-op inside the mode
        return laid_out_like(primal, dtype, zeros=False).copy_(tangent)


def laid_out_like(primal: torch.Tensor, dtype: torch.dtype, zeros: bool = True):
    """New memory of `dtype` laid out like `primal` (sizes, strides, offset,
    storage length, lazy bits); zeros, or (`zeros=False`) unset where the primal
    covers its storage. Zeros are not written through the layout: an expanded
    primal's memory has elements that share a location."""
    offset = primal.storage_offset()
    length = _storage_length(primal)
    if zeros or offset or length != primal.numel():
        # A view into a larger storage: the tangent gets storage of the same
        # size, zeros outside the view, so as_strided reaches the same places.
        storage = torch.zeros(length, dtype=dtype, device=primal.device)
        laid_out = storage.as_strided(primal.size(), primal.stride(), offset)
    else:
        laid_out = torch.empty_strided(
            primal.size(), primal.stride(), dtype=dtype, device=primal.device
        )
    return with_lazy_bits(laid_out, primal)


def _storage_length(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def set_new_tangent(
    t: torch.Tensor, level: Level, value: torch.Tensor, fresh: bool = False
) -> None:
    """Give `t`, which had no tangent at `level`, the tangent `value` (`fresh`: a
    copy of it, value being another tensor's tangent). If t is a view, the
    tangent lives on its base (zeros elsewhere), so the base and its other views
    see it."""
    base = forward_base(t)
    if base is None or own_tangent(t, level) is None:
        set_tangent(t, level, conform_layout(value, t, fresh))
        return
    base_tangent = tangent_of(base, level)
    if (
        base_tangent is None
        and value.is_complex() == base.is_complex()
        and same_layout(value, base)
        and same_layout(value, t)
    ):
        # As native: a tangent laid out like both becomes the base's as it is
        # (in its own dtype), and the view's is the same tensor. (Not a real one
        # for a complex base, which only an empty `.real` view lays out alike:
        # the base's complex views could not be taken of it.)
        value = conform_layout(value, t, fresh)
        set_tangent(base, level, value)
        set_tangent(t, level, value)
        return
    with autograd_enabled():
        if base_tangent is None:
            base_tangent = laid_out_like(base, base.dtype)
            set_tangent(base, level, base_tangent)
        view_tangent = view_of_tangent(base_tangent, t, base)
        view_tangent.copy_(value)
    set_tangent(t, level, view_tangent)
