"""make_dual's checks, native's errors word for word, which
`forward_ad.make_dual` and `distributed.make_packed_dual` both make."""

from __future__ import annotations

import torch

from .nested_layout import same_shape, shape_text
from .tangents import tangent_of


def check_floating(t: torch.Tensor, what: str) -> None:
    if not (t.is_floating_point() or t.is_complex()):
        raise ValueError(
            f"Expected {what} to be floating point or complex, but got: {t.dtype}"
        )


def check_dual(tensor: torch.Tensor, tangent: torch.Tensor, lvl) -> None:
    """make_dual's checks: native's errors, word for word."""
    check_floating(tensor, "primal")
    check_floating(tangent, "tangent")
    if not same_shape(tangent, tensor):  # (nested: strided ones; jagged are not here)
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {shape_text(tensor)} "
            f"while the given forward gradient is of size {shape_text(tangent)}."
            + local_shape_hint(tensor, tangent)
        )
    if torch._C._is_fwd_grad_enabled():  # (disabled: tangents are unseen, as native)
        if tangent_of(tensor, lvl) is not None:
            raise RuntimeError(
                "Making a dual Tensor based on a Tensor that already has a forward "
                f"gradient at the same level {lvl.index} is not supported."
            )
        if may_be_dual(tangent) and tangent_of(tangent, lvl) is not None:
            raise RuntimeError(
                "Setting a forward grad that itself has a forward gradient at the "
                f"same level{lvl.index} is not supported."
            )


def local_shape_hint(tensor: torch.Tensor, tangent: torch.Tensor) -> str:
    """For a DTensor given a tangent of its local shape: what to give instead."""
    to_local = getattr(tensor, "to_local", None)
    if to_local is None or isinstance(tangent, type(tensor)):
        return ""
    if tangent.shape != to_local().shape:
        return ""
    return (
        " The tensor is a DTensor and the tangent has its local shape: give a DTensor "
        "tangent (DTensor.from_local(t, mesh, placements)) or the global tangent"
    )


def may_be_dual(t: torch.Tensor) -> bool:
    """Cheap test before `tangent_of`: a tensor with no entries of its own, no
    base and no autograd history has no tangent at any level."""
    return bool(t.__dict__) or t._base is not None or t.requires_grad
