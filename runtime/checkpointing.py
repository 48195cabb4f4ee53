"""torch.utils.checkpoint (non-reentrant) inside a level: its memory saving kept,
forward over reverse through it right.

The checkpoint's forward lets go of the values its function computed (their
tangents go too: saved_tangents.py). Its backward runs the function again, inside
the level, so the values come back with their tangents, and hands autograd's
unpacking what its recomputation hook packed: a detached alias of each value (or
the value itself), which autograd may rebuild as a new tensor. Native's unpacking
restores the forward gradient its saved variable kept from the first forward
(holding every saved value's tangent: pytorch#129293); here the hook's packed
values get the recomputed tangents, a rebuilt one finds them under its geometry
(levels.SavedOutputs, as any rebuilt saved output), and the checkpoint's frame
holds them as long as its graph can unpack them.

The tangents are read once the recomputation is over: the C++ kernels set an
output's tangent after autograd has packed the output. So the function runs to
its end inside a level (checkpoint's early stop is off there).

The hook's class is patched when the first level is entered and kept for good;
it does what torch's does while no level is active in the thread.
"""

from __future__ import annotations

import functools

import torch
import torch.utils.checkpoint as torch_checkpoint
from torch.overrides import TorchFunctionMode

from .levels import MISSING, STATE, own_tangent, set_tangent
from .saved_tangents import SavedTangent
from .tangents import remembered_tangent, tangent_of

# The checkpoint frame's attribute holding the tangents of the values its
# backward recomputed: they live as long as the frame (as long as the graph
# that can unpack them), and are held nowhere else.
_KEPT = "_dualgen_recomputed_tangents"


def _tangents_of_packed(value: torch.Tensor) -> list:
    """(level, tangent) for each level where the value being packed has one: its
    own, or, for an output (autograd packs a fresh alias of it), the one its
    level remembered under its geometry."""
    found = []
    for level in STATE.levels:
        tangent = tangent_of(value, level)
        if tangent is None and len(level.saved):
            tangent = remembered_tangent(value, level)
        if tangent is not None:
            found.append((level, tangent))
    return found


def _keep(holder: torch.Tensor, found: list) -> None:
    """`holder`, a tensor the checkpoint may hand autograd's unpacking, gets the
    tangents (native's unpacking sets the forward gradient it saved); autograd
    may rebuild it as a new tensor, which finds them under its geometry."""
    for level, tangent in found:
        if own_tangent(holder, level) is MISSING:
            set_tangent(holder, level, tangent)
        entry = SavedTangent(tangent)
        entry.strong = None  # the frame holds it
        level.saved.remember(holder, {level: entry})


class _CaptureAlias(TorchFunctionMode):
    """While the recomputation hook packs `value`: the detached alias it makes of
    `value` (what it hands back at unpacking) joins `holders`."""

    def __init__(self, value: torch.Tensor, holders: list) -> None:
        super().__init__()
        self.value, self.holders = value, holders

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.detach and args and args[0] is self.value:
            self.holders.append(out)
        return out


def _wrap_pack(pack, packed: list):
    # (wraps: torch 2.14 marks its hooks by attributes of the function)
    @functools.wraps(pack)
    def pack_hook(x):
        if not STATE.levels or not isinstance(x, torch.Tensor):
            return pack(x)
        holders = [x]
        packed.append(holders)
        with _CaptureAlias(x, holders):
            return pack(x)

    return pack_hook


def _keep_all(frame, packed: list) -> None:
    """Once the recomputation is over (the C++ kernels set an output's tangent
    after autograd has packed it): each packed value's holders get its tangents,
    and the frame holds them."""
    kept = frame.__dict__.setdefault(_KEPT, [])
    for value, *aliases in packed:
        found = _tangents_of_packed(value)
        kept.extend(tangent for _, tangent in found)
        for holder in (value, *aliases):
            _keep(holder, found)
    packed.clear()


_INSTALLED = False


def install() -> None:
    """Patch checkpoint's recomputation hook (once, for good)."""
    global _INSTALLED
    if _INSTALLED:
        return
    hook_type = torch_checkpoint._recomputation_hook
    original_init, original_exit = hook_type.__init__, hook_type.__exit__

    @functools.wraps(original_init)
    def __init__(self, target_frame_ref, *args, **kwargs):
        original_init(self, target_frame_ref, *args, **kwargs)
        frame = target_frame_ref() if STATE.levels else None
        if frame is not None:
            # The whole function runs again: a value's tangent is complete once
            # its op has returned, after the value was packed.
            frame.early_stop = False
            self._dualgen_frame, self._dualgen_packed = target_frame_ref, []
            self.pack_hook = _wrap_pack(self.pack_hook, self._dualgen_packed)

    @functools.wraps(original_exit)
    def __exit__(self, *exc):
        result = original_exit(self, *exc)
        frame = getattr(self, "_dualgen_frame", lambda: None)()
        if frame is not None:
            _keep_all(frame, self._dualgen_packed)
        return result

    hook_type.__init__, hook_type.__exit__ = __init__, __exit__
    _INSTALLED = True
