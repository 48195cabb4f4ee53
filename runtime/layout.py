"""How a tangent is stored: laid out as native forward AD lays it out.

A tangent keeps its own layout when it matches its primal's (`same_layout`) and is
otherwise copied into memory laid out like the primal (`conform_layout`,
`laid_out_like`); a view given a new tangent stores it on its base
(`set_new_tangent`).

Under vmap a tangent may be a batched tensor (a tangent per batch element, with no
storage of its own): native then skips the storage-length test and lays copies out
with the primal's layout per element (`zeros_laid_out_for`).
"""

from __future__ import annotations

import sys

import torch

from . import torch_features
from .levels import (
    Level,
    own_tangent,
    set_tangent,
    tangent_owner,
    view_of_tangent,
    with_lazy_bits,
    without_lazy_bits,
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
    # No storage (vmap): tested first, as reading a missing storage raises, and
    # an exception costs far more than the test (the vectorized jacobians' every
    # output comes here).
    has_storage = torch._C._has_storage
    storageless = not (has_storage(tangent) and has_storage(primal))
    if storageless and _batched_tangent_of_plain(tangent, primal):
        return True
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
    if primal.is_nested:  # (strided: a tangent of the same components, as it is)
        return tangent.clone() if fresh else tangent
    if type(primal) is not torch.Tensor:
        placed = _placed_like(tangent, primal)
        if placed is not None:
            return placed
    keep = same_layout(tangent, primal)
    if keep and not fresh:
        return tangent
    dtype = tangent.dtype if keep else primal.dtype
    with autograd_enabled():  # from make_dual; a no-op inside the mode
        if torch._C._has_storage(tangent):
            laid_out = laid_out_like(primal, dtype, zeros=False)
        else:  # batched by vmap, most likely
            laid_out = _batched_laid_out_like(primal, dtype, tangent)
        return laid_out.copy_(tangent)


def _placed_like(tangent: torch.Tensor, primal: torch.Tensor):
    """A DTensor's tangent: a DTensor on the primal's mesh with the primal's
    placements (None: the primal is no DTensor). A DTensor tangent placed
    otherwise is redistributed; a plain one is taken as the global value and
    distributed as `distribute_tensor` does (from rank 0). Its layout is then the
    local tensors' business: each rank's local tangent is laid out like its
    local primal."""
    module = sys.modules.get("torch.distributed.tensor")
    if module is None or not isinstance(primal, module.DTensor):
        return None
    torch_features.require("dtensor")
    mesh, placements = primal.device_mesh, primal.placements
    with autograd_enabled():
        if not isinstance(tangent, module.DTensor):
            return module.distribute_tensor(tangent, mesh, placements)
        if tangent.device_mesh != mesh or tuple(tangent.placements) != tuple(
            placements
        ):
            return tangent.redistribute(mesh, placements)
    return tangent


def laid_out_like(primal: torch.Tensor, dtype: torch.dtype, zeros: bool = True):
    """New memory of `dtype` laid out like `primal` (sizes, strides, offset,
    storage length, lazy bits); zeros, or (`zeros=False`) unset where the primal
    covers its storage. Zeros are not written through the layout: an expanded
    primal's memory has elements that share a location."""
    offset = primal.storage_offset()
    length = _storage_length(primal)
    covers = not offset and length == primal.numel()
    if zeros and covers and primal.is_contiguous():
        # A tensor of its own, as native's (not a view of a storage tensor: a
        # view's tangent is then a view of this one, `_base` and all).
        laid_out = torch.empty_strided(
            primal.size(), primal.stride(), dtype=dtype, device=primal.device
        ).zero_()
    elif zeros or not covers:
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
    try:
        return t.untyped_storage().nbytes() // t.element_size()
    except RuntimeError:
        _refuse_batched_primal(t)
        raise


def is_batched(t: torch.Tensor) -> bool:
    """Whether t is batched by vmap (torch.vmap's or the legacy one that
    `torch.autograd.functional.jacobian(vectorize=True)` and gradcheck use)."""
    functorch = torch._C._functorch
    return functorch.is_batchedtensor(t) or functorch.is_legacy_batchedtensor(t)


def _batched_tangent_of_plain(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Whether `same_layout`'s storage test, which failed for want of storage,
    passes by native's rule (`_has_same_storage_numel`): a batched tangent of a
    plain primal does, vmap letting no view reach beyond a tensor's elements
    anyway. A batched primal is refused: its ops reach the mode as its unbatched
    tensor, which would not carry the tangent."""
    _refuse_batched_primal(primal)
    _refuse_functorch_batched(tangent)
    return is_batched(tangent)


def _refuse_batched_primal(primal: torch.Tensor) -> None:
    if is_batched(primal):
        raise RuntimeError(
            "dualgen cannot make a dual of a tensor batched by vmap: call make_dual "
            "outside vmap, or vmap over the tangent only (batching of the primal "
            "is not supported)"
        )


def _refuse_functorch_batched(tangent: torch.Tensor) -> None:
    """torch.vmap's batched tensors work only while their vmap level is on
    functorch's stack, which functorch pops before a dispatch mode runs: the
    mode could not compute with such a tangent (the legacy vmap has no stack)."""
    if torch._C._functorch.is_batchedtensor(tangent):
        raise RuntimeError(
            "dualgen cannot take a tangent batched by torch.vmap: functorch hides "
            "its vmap level from dispatch modes, where dualgen computes tangents. "
            "Batch tangents with torch._vmap_internals._vmap (as "
            "torch.autograd.functional.jacobian(vectorize=True) does), or make "
            "the dual outside torch.vmap and vmap over it"
        )


def _batched_laid_out_like(primal: torch.Tensor, dtype: torch.dtype, tangent):
    """New memory of `dtype` with the primal's sizes, strides and bits for each
    batch element of `tangent`, as native copies a batched tangent
    (`new_empty_strided`); plain memory (`laid_out_like`) if it is not batched."""
    if not is_batched(tangent):
        return laid_out_like(primal, dtype, zeros=False)
    _refuse_functorch_batched(tangent)
    laid_out = tangent.new_empty_strided(primal.size(), primal.stride(), dtype=dtype)
    return with_lazy_bits(laid_out, primal)


def zeros_laid_out_for(value: torch.Tensor, primal: torch.Tensor, dtype):
    """Zeros of `dtype` laid out like `primal`, to write `value` into: batched
    like `value` under vmap (the primal's layout per batch element, as native's
    `_new_zeros_with_same_feature_meta`), so views of it reach what the same
    views of the primal reach."""
    zeros = laid_out_like(primal, dtype)
    if not is_batched(value):
        return zeros
    batched = torch.ops.aten._new_zeros_with_same_feature_meta(
        value, without_lazy_bits(zeros)
    )
    return with_lazy_bits(batched, primal)


def set_new_tangent(
    t: torch.Tensor, level: Level, value: torch.Tensor, fresh: bool = False
) -> None:
    """Give `t`, which had no tangent at `level`, the tangent `value` (`fresh`: a
    copy of it, value being another tensor's tangent). If t is a view, the
    tangent lives on its base (zeros elsewhere), so the base and its other views
    see it."""
    base = tangent_owner(t, level)
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
        # (in its own dtype). (Not a real one for a complex base, which only an
        # empty `.real` view lays out alike: the base's complex views could not
        # be taken of it.) A batched value is copied: vmap hides whether it
        # views an operand's tangent. The view's is a view of it, where native's
        # is the same tensor, which an in-place view op of the base (unsqueeze_)
        # then reshapes under the view.
        value = conform_layout(value, t, fresh or is_batched(value))
        set_tangent(base, level, value)
        with autograd_enabled():
            set_tangent(t, level, view_of_tangent(value, t, base))
        return
    with autograd_enabled():
        if base_tangent is None:
            base_tangent = zeros_laid_out_for(value, base, base.dtype)
            set_tangent(base, level, base_tangent)
        view_tangent = view_of_tangent(base_tangent, t, base)
        view_tangent.copy_(value)
    set_tangent(t, level, view_tangent)
