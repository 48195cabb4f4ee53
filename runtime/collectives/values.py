"""A dual's value and tangent as collectives send and receive them: packed
side by side, and written back into the caller's tensors or new ones. Shared by
`dual.py` (linear collectives) and `by_element.py` (MAX, MIN, PRODUCT)."""

from __future__ import annotations

import torch

from ..layout import conform_layout, set_new_tangent
from ..levels import set_tangent
from ..tangents import is_differentiable_dtype, tangent_of
from .packing import INTERLEAVED


def pack(t: torch.Tensor, level) -> torch.Tensor:
    """`t` and its tangent at `level` along a new last dimension (by_element's)."""
    return INTERLEAVED.pack(t, tangent_or_zeros(t, level))


def tangent_or_zeros(t: torch.Tensor, level) -> torch.Tensor:
    """`t`'s tangent at `level` in t's dtype, zeros if it has none."""
    tangent = tangent_of(t, level) if is_differentiable_dtype(t) else None
    if tangent is None:
        return torch.zeros_like(t)
    return tangent if tangent.dtype == t.dtype else tangent.to(t.dtype)


def write_value(t: torch.Tensor, value, tangent, level) -> None:
    """Give the caller's tensor `t` what arrived for it: the value, in place, and
    the tangent, into its tangent (or as its new tangent) at `level` (None: a
    level that has ended)."""
    t.copy_(value)
    if level is None or not is_differentiable_dtype(t):
        return
    own = tangent_of(t, level)
    if own is not None:
        own.copy_(tangent)
    elif nonzero(tangent):
        set_new_tangent(t, level, tangent, fresh=True)


def new_value(value, tangent, level, had_tangent: bool = True) -> torch.Tensor:
    """A functional collective's new tensor, with its tangent unless it only
    received zeros for a tensor that had none."""
    value = value.contiguous()
    if is_differentiable_dtype(value) and (had_tangent or nonzero(tangent)):
        set_tangent(value, level, conform_layout(tangent, value, fresh=True))
    return value


def nonzero(tangent: torch.Tensor) -> bool:
    """Whether a received tangent has a nonzero element. A tensor that had no
    tangent and received only zeros (no rank's had one) stays plain, as it would
    outside the level: code that writes it into out= ops (FSDP's copy-out of
    gathered parameters) keeps working, and zeros are what no tangent means."""
    return bool(tangent.any())


def flat(value) -> list:
    """The tensors in an argument or a return: a tensor, or lists and tuples of
    them (a schema's Tensor[], Tensor[][] and tuples), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if type(value) in (list, tuple):
        return [t for v in value for t in flat(v)]
    return []
