"""Reading tangents inside the mode, and the dispatch contexts tangent code runs in.

`tangent_of` finds a tensor's tangent at a level (its own, derived from its base's
through the same view, or a saved output's); `handling_levels_below` and
`autograd_enabled` set up what the mode and autograd see while a level's primal
and tangent computations run. The lowest of the mode's modules: the others
(`layout`, `dtypes`, `outputs`, `inplace`, `tracked`, `mode`) build on it.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode,
    _pop_mode,
    _push_mode,
)

from .levels import (
    MISSING,
    STATE,
    Level,
    forward_base,
    is_forward_root,
    own_tangent,
    resolve_pending,
    set_tangent,
    view_of_tangent,
)
from .saved_tangents import SavedTangent, saved_form


def is_differentiable_dtype(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def autograd_enabled():
    """Re-enable the keys the user's context does not exclude (autograd among them),
    which are excluded below autograd where the mode runs; the included keys stay
    as they are now (the Python key only while the mode is pushed)."""
    return torch._C._ForceDispatchKeyGuard(
        torch._C._dispatch_tls_local_include_set(), STATE.user_exclude
    )


class handling_levels_below:
    """Within: the mode sees only levels below `level` (and nothing if none).

    A class rather than a generator: it runs on every op with tangents."""

    __slots__ = ("level", "mode", "previous", "pushed")

    def __init__(self, level: Level, mode):
        self.level = level
        self.mode = mode

    def __enter__(self) -> None:
        self.previous = STATE.cap
        STATE.cap = self.level.index - 1
        # Inside __torch_dispatch__ the mode is off the stack; from user code
        # (unpack_dual deriving a view's tangent) it is still on it.
        # (Level 0 leaves nothing for the mode to see, except that a tensor
        # subclass re-entering dispatch needs a mode on the stack: see mode.py.)
        self.pushed = (
            self.level.index > 0 or STATE.subclass_op
        ) and _get_current_dispatch_mode() is not self.mode
        if self.pushed:
            _push_mode(self.mode)

    def __exit__(self, *exc) -> None:
        if self.pushed:
            _pop_mode()
        STATE.cap = self.previous


def tangent_of(t: torch.Tensor, level: Level) -> torch.Tensor | None:
    """t's tangent at `level`: its own, the same view of its base's, or a saved
    output's (autograd rebuilds saved outputs as new tensors)."""
    if STATE.pending:
        resolve_pending()  # (tracked.defer_formula)
    own = own_tangent(t, level)
    if own is not MISSING:
        return own
    base = forward_base(t)
    if base is not None:
        if is_forward_root(t, level):
            return None  # a make_dual result or unpack_dual's primal: none yet
        base_tangent = tangent_of(base, level)
        if base_tangent is None:
            return None
        with handling_levels_below(level, STATE.mode), autograd_enabled():
            derived = view_of_tangent(base_tangent, t, base)
        set_tangent(t, level, derived)
        return derived
    # Efficient zero tensors (autograd's zeros, e.g. the gradient of sgn) have no
    # memory, so no saved output can be one. A rebuilt saved output keeps its
    # place in the graph (a grad_fn); `.data` and from_dlpack copies do not, nor
    # does `output.detach().requires_grad_()`, a leaf with no tangent.
    if level.saved and t.grad_fn is not None and not t._is_zerotensor():
        value = remembered_tangent(t, level)
        if value is not None:
            set_tangent(t, level, value)
            return value
    return None


def remembered_tangent(t: torch.Tensor, level: Level) -> torch.Tensor | None:
    """The tangent `level` remembered for an output with t's geometry and memory
    (levels.SavedOutputs), if it is alive."""
    entries = level.saved.find(t)
    value = None if entries is None else entries.get(level)
    if isinstance(value, SavedTangent):
        value = value.resolve()
    return value if isinstance(value, torch.Tensor) else None


def remember_saved_outputs(level: Level, outputs) -> None:
    """Let tangents of outputs be found again after autograd saved and rebuilt them
    (backward formulas that read the output: tanh, sigmoid, relu, softmax, ...)."""
    from .levels import TANGENTS

    for o in tensors_in(outputs):
        entries = o.__dict__.get(TANGENTS)
        if entries and level in entries and not o._is_zerotensor():
            level.saved.remember(o, saved_form(entries, level, o))


def tensors_in(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for item in v:
                if isinstance(item, torch.Tensor):
                    yield item


def argument_tangent(value, level: Level):
    """An op argument's tangent at `level`: a tensor's, a list's (with None where
    absent; None when none has one), None for anything else."""
    if isinstance(value, torch.Tensor):
        return tangent_of(value, level) if is_differentiable_dtype(value) else None
    if isinstance(value, (list, tuple)):
        tangents = [
            (
                tangent_of(v, level)
                if isinstance(v, torch.Tensor) and is_differentiable_dtype(v)
                else None
            )
            for v in value
        ]
        return tangents if any(t is not None for t in tangents) else None
    return None
