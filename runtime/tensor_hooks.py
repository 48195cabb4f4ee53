"""Tensor behaviour that never reaches the dispatch mode, patched when the first
level is entered and kept for good: the patches do nothing while no level is
active in the thread, and changing `torch.Tensor`'s attributes on every level
entered and exited would cost every later attribute lookup on tensors (Python's
type caches are invalidated), about 5 µs per level.

- `detach_()` is done by autograd's own kernel, which calls no aten op: the mode
  cannot see it, so the patched method drops the tensor's tangents itself.
- Printing a tensor (`torch._tensor_str`) asks native forward AD for its tangent;
  the patched printer shows dualgen's as `tangent=...`, as native shows its own.
"""

from __future__ import annotations

import torch
import torch._tensor_str as tensor_str

from .levels import STATE, forget_view, set_tangent

_ORIGINAL_DETACH_ = torch._C.TensorBase.detach_
_ORIGINAL_TORCH_DETACH_ = torch.detach_
_ORIGINAL_STR_INTERN = tensor_str._str_intern


def _detach_(self: torch.Tensor) -> torch.Tensor:
    out = _ORIGINAL_DETACH_(self)  # raises for a view, as native
    if STATE.levels:
        for level in STATE.levels:
            set_tangent(self, level, None)
        forget_view(self)
    return out


def _torch_detach_(input: torch.Tensor) -> torch.Tensor:
    return _detach_(input)


def _str_intern(inp, *, tensor_contents=None):
    """Native's printer, with `unpack_dual` answering for dualgen's innermost
    level while it prints `inp` (only `inp`: any other tensor gets native's)."""
    if not STATE.levels or not torch._C._is_fwd_grad_enabled():
        return _ORIGINAL_STR_INTERN(inp, tensor_contents=tensor_contents)
    unpacked = _unpack_dual(inp)
    if unpacked.tangent is None:
        return _ORIGINAL_STR_INTERN(inp, tensor_contents=tensor_contents)
    native_unpack = torch.autograd.forward_ad.unpack_dual

    def unpack(tensor, *, level=None):
        if tensor is inp and level is None:
            return unpacked
        return native_unpack(tensor, level=level)

    torch.autograd.forward_ad.unpack_dual = unpack
    try:
        return _ORIGINAL_STR_INTERN(inp, tensor_contents=tensor_contents)
    finally:
        torch.autograd.forward_ad.unpack_dual = native_unpack


_INSTALLED = False
_unpack_dual = None  # forward_ad.unpack_dual, which install() is given


def install(unpack_dual) -> None:
    """Patch, once (from the first level entered in any thread); the printer
    shows what `unpack_dual` (forward_ad's) finds."""
    global _INSTALLED, _unpack_dual
    _unpack_dual = unpack_dual
    if not _INSTALLED:
        torch.Tensor.detach_ = _detach_
        torch.detach_ = _torch_detach_
        tensor_str._str_intern = _str_intern
        _INSTALLED = True


def uninstall() -> None:
    """Undo the patches (tests; dualgen itself keeps them)."""
    global _INSTALLED
    if "detach_" in vars(torch.Tensor):
        del torch.Tensor.detach_  # back to TensorBase's
    torch.detach_ = _ORIGINAL_TORCH_DETACH_
    tensor_str._str_intern = _ORIGINAL_STR_INTERN
    _INSTALLED = False
