"""`dualgen.forward_ad`: the API of `torch.autograd.forward_ad`, with nested levels.

    import dualgen.forward_ad as fwAD

    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        value, jvp = fwAD.unpack_dual(y)

Levels nest: each has its own tangents, and the tangent computations of an inner
level are differentiated by the outer ones.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
import torch.autograd.forward_ad as native_forward_ad
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode,
    _pop_mode,
    _push_mode,
)

from . import checkpointing, functions, tensor_hooks, torch_features
from .backend import kernel_backend
from .dispatch import jagged
from .dispatch.higher_order import flex_attention_as_before, flex_attention_uncompiled
from .dispatch.mode import DualMode, alias
from .dual_checks import check_dual
from .hot_path import policy as hot_path_policy  # noqa: F401 - follows the backend
from .hot_path import state as hot_path_state
from .layout import conform_layout
from .levels import (
    STATE,
    Level,
    clear_level,
    current_level,
    drop_pending,
    mark_forward_root,
    set_tangent,
)
from .saved_tangents import forget_saved_tangents
from .tangents import handling_levels_below, tangent_of

# PyTorch's forward-AD module has these; its tests (and torch's own code) use them.
_is_fwd_grad_enabled = torch._C._is_fwd_grad_enabled
_set_fwd_grad_enabled = native_forward_ad._set_fwd_grad_enabled


def __getattr__(name: str):
    if name == "_current_level":  # the innermost level's index, -1 if none
        return len(STATE.levels) - 1
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]


class UnpackedDualTensor(NamedTuple):
    """The primal and tangent of a dual tensor (tangent None when it has none)."""

    primal: torch.Tensor
    tangent: torch.Tensor | None


def enter_dual_level() -> int:
    """Enter a new (possibly nested) forward AD level; return its index."""
    state = STATE
    if not state.levels:
        torch_features.require("dual_level", "custom_function")
        state.user_exclude = torch._C._dispatch_tls_local_exclude_set()
        mode = DualMode()
        _push_mode(mode)
        state.mode = mode
        functions.install()  # custom autograd.Functions use their jvp
        tensor_hooks.install(unpack_dual)  # detach_ and printing (once, for good)
        checkpointing.install()  # recomputed values keep their tangents
        flex_attention_uncompiled()  # (Dynamo refuses to trace under the mode)
        kernel_backend()  # chosen on first use; with C++ kernels, the hot path
    level = Level(len(state.levels))
    state.levels.append(level)
    state.cap = level.index
    return level.index


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the innermost level (which `level`, if given, must name): every tensor
    that was dual at that level is plain there again, and its tangents are freed."""
    state = STATE
    if not state.levels:
        raise RuntimeError("Trying to exit a forward AD level but no level is active.")
    if level is not None and level != len(state.levels) - 1:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was "
            "created. This is not supported."
        )
    drop_pending(state.levels[-1])  # its tangents still to compute
    forget_saved_tangents(state.levels[-1])
    finished = state.levels.pop()
    clear_level(finished)
    state.cap = len(state.levels) - 1
    if not state.levels:
        if _get_current_dispatch_mode() is state.mode:
            _pop_mode()
        state.mode = None
        functions.uninstall()
        flex_attention_as_before()


class dual_level(contextlib.ContextDecorator):
    """Context manager (and decorator) for one forward AD level.

    Leaving it, normally or by an exception, exits the level it entered.
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


def make_dual(
    tensor: torch.Tensor, tangent: torch.Tensor, *, level: int | None = None
) -> torch.Tensor:
    """A view of `tensor` carrying `tangent` at `level` (default: the innermost).

    The result is backward-differentiable (a view of the primal) and has no forward
    derivative with respect to `tensor` at that level. A tangent with other strides
    is copied into the primal's layout.
    """
    lvl = current_level(level)
    if jagged.is_jagged(tensor):
        return _make_jagged_dual(tensor, tangent, lvl)
    hot_path = hot_path_state.make_dual
    if hot_path is not None:
        dual = hot_path(tensor, tangent, lvl)
        if dual is not hot_path_state.SLOW:
            return dual
    check_dual(tensor, tangent, lvl)
    dual = alias(tensor)  # as the mode runs it: other levels carry over
    mark_forward_root(dual, lvl)
    set_tangent(dual, lvl, conform_layout(tangent, tensor))
    return dual


def unpack_dual(
    tensor: torch.Tensor, *, level: int | None = None
) -> UnpackedDualTensor:
    """The primal (a view of `tensor` without tangent at `level`) and the tangent."""
    if not STATE.levels:
        return UnpackedDualTensor(tensor, None)
    lvl = current_level(level)
    if jagged.is_jagged(tensor):
        return _unpack_jagged_dual(tensor, lvl)
    hot_path = hot_path_state.unpack_dual
    if hot_path is not None:
        unpacked = hot_path(tensor, lvl)
        if unpacked is not hot_path_state.SLOW:
            return UnpackedDualTensor(*unpacked)
    tangent = tangent_of(tensor, lvl) if _is_fwd_grad_enabled() else None
    if lvl.index == STATE.cap and STATE.mode is not None:
        # The primal has no tangent at lvl: alias it with the mode handling only
        # the levels below (whose tangents it keeps), not deriving one to drop.
        with handling_levels_below(lvl, STATE.mode):
            primal = torch.ops.aten.alias.default(tensor)
    else:
        primal = torch.ops.aten.alias.default(tensor)
    mark_forward_root(primal, lvl)
    set_tangent(primal, lvl, None)
    return UnpackedDualTensor(primal, tangent)


def _make_jagged_dual(tensor: torch.Tensor, tangent: torch.Tensor, lvl) -> torch.Tensor:
    """A jagged nested tensor's tangent lives on its values (dispatch/jagged.py):
    the dual wraps the values made dual, with the primal's offsets."""
    torch_features.require("nested")
    jagged.check_same_structure(tensor, tangent)
    values = make_dual(tensor.values(), tangent.values(), level=lvl.index)
    return jagged.with_values(tensor, values)


def _unpack_jagged_dual(tensor: torch.Tensor, lvl) -> UnpackedDualTensor:
    primal_values, tangent_values = unpack_dual(tensor.values(), level=lvl.index)
    tangent = None
    if tangent_values is not None:
        tangent = jagged.with_values(tensor, tangent_values)
    return UnpackedDualTensor(jagged.with_values(tensor, primal_values), tangent)
