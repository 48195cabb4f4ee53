"""Dual levels and where tangents live.

A tangent is stored on the tensor object itself, in a small dict keyed by the level
(`tensor.__dict__[TANGENTS]`), as native PyTorch keeps it on the autograd meta. Each
level remembers which tensors it gave tangents so that leaving it drops them all.
A view without a tangent of its own sees its base's tangent through the same view
(tangents have their primal's layout, so the view is an `as_strided` of the base's
tangent); a tensor can also be marked as having no tangent at a level (`detach`,
`unpack_dual(...).primal`), which stops that lookup.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass, field

import torch

from .nested_layout import component_sizes, component_strides

TANGENTS = "_dualgen_tangents"
NO_TANGENT = object()  # marks a tensor that must not inherit its base's tangent


_FIRST_SWEEP = 1024


class SavedOutputs:
    """The outputs autograd may save, at one level, by geometry.

    Autograd rebuilds a saved output as a new tensor object sharing its storage,
    so the output's tangent entries are found again by where and how its elements
    lie, and only while its memory lives: a weak reference to the storage's Python
    object (which lives exactly as long as the storage, shared by autograd's
    saved copy) drops the entry when the memory goes; the output itself is not
    held. The C++ backend's levels hold the extension's twin (csrc/dualgen/saved.h),
    which the hot path writes without calling into Python."""

    __slots__ = ("__weakref__", "_saved")

    def __init__(self) -> None:
        # geometry -> (weak reference to the storage's object, tangent entries)
        self._saved: dict = {}

    def remember(self, t: torch.Tensor, entries: dict) -> None:
        key = geometry(t)
        # Each entry's own callback, bound to its key: weak references to one
        # memory (an output and a view of it) compare equal, so they cannot key
        # a table of their own.
        held = weakref.ref(t.untyped_storage(), functools.partial(self._freed, key))
        self._saved[key] = (held, entries)

    def find(self, t: torch.Tensor) -> dict | None:
        saved = self._saved.get(geometry(t))
        if saved is not None and saved[0]() is t.untyped_storage():
            return saved[1]
        return None

    def _freed(self, key: tuple, held) -> None:
        if self._saved.get(key, (None,))[0] is held:
            del self._saved[key]

    def clear(self) -> None:
        self._saved.clear()

    def __len__(self) -> int:
        return len(self._saved)


def geometry(t: torch.Tensor) -> tuple:
    """Where and how t's elements lie (its first element's address includes the
    storage offset): a saved output rebuilt by autograd has the same."""
    if t.is_nested:  # (no single shape: each component's)
        return (t.data_ptr(), component_sizes(t), component_strides(t), t.dtype)
    return (t.data_ptr(), t.shape, t.stride(), t.dtype)


# What a new level keeps its saved outputs in, and what drops a finished
# level's entries: SavedOutputs and `drop_entries`, or the C++ twins while the
# C++ backend is in use (`use_store`).
_saved_outputs_type: type = SavedOutputs


def use_store(saved_outputs: type, drop) -> None:
    global _saved_outputs_type, _drop
    _saved_outputs_type, _drop = saved_outputs, drop


@dataclass(eq=False)
class Level:
    """One dual level. `index` is its depth; identity (not the index) keys tangents."""

    index: int
    tensors: list = field(default_factory=list)  # weakrefs to tensors with entries
    saved: SavedOutputs = field(default_factory=lambda: _saved_outputs_type())
    # A level can last a whole training loop: the list is swept of dead
    # references each time it doubles, so it stays in proportion to what lives.
    sweep_tensors_at: int = _FIRST_SWEEP
    # What lives as long as the level unless finished first: collectives'
    # Works still to be waited for (collectives/deferred.py), by id.
    pending_works: dict = field(default_factory=dict)


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.levels: list[Level] = []
        self.cap: int = -1  # highest level index the mode handles right now
        self.mode = None  # the DualMode while any level is active
        self.user_exclude = None  # dispatch keys the user's context excludes
        # The op being handled has a tensor subclass with its own dispatch among
        # its arguments: the mode stays on the stack while it runs (`mode.py`).
        self.subclass_op = False
        self.defer_next = False  # the next op reaching the mode goes to the subclass
        # Output tangents still to compute, each a callable with a `level`
        # (`tracked.defer_formula`), in the order their ops ran.
        self.pending: list = []
        # Saved outputs' tangents to move onto their nodes at the next op
        # (saved_tangents.py).
        self.saved_to_move: list = []


STATE = _ThreadState()


def resolve_pending() -> None:
    """Compute the output tangents that wait for the autograd layer above the
    mode to record their op (`tracked.defer_formula`): each is computed once,
    oldest first, those their formulas defer in turn included."""
    while STATE.pending:
        pending, STATE.pending = STATE.pending, []
        for i, compute in enumerate(pending):
            try:
                compute()
            except BaseException:
                STATE.pending[:0] = pending[i + 1 :]
                raise


def drop_pending(level: Level) -> None:
    """Forget the tangents still to compute at `level` (it ends)."""
    if STATE.pending:
        STATE.pending = [p for p in STATE.pending if p.level is not level]


def current_level(level: int | None) -> Level:
    """The Level object for a user-facing level index (None: the innermost)."""
    levels = STATE.levels
    if not levels:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, "
            "make sure to enter_dual_level() first."
        )
    if level is None:
        return levels[-1]
    if not 0 <= level < len(levels):
        raise RuntimeError(
            f"forward AD level {level} is not active (active: 0..{len(levels) - 1})"
        )
    return levels[level]


def _entries(t: torch.Tensor) -> dict | None:
    return t.__dict__.get(TANGENTS)


def set_tangent(t: torch.Tensor, level: Level, tangent: torch.Tensor | None) -> None:
    """Record `tangent` (None: explicitly none) as t's tangent at `level`."""
    entries = t.__dict__.get(TANGENTS)
    if entries is None:
        entries = t.__dict__[TANGENTS] = {}
    if level not in entries:
        level.tensors.append(weakref.ref(t))
        if len(level.tensors) > level.sweep_tensors_at:
            sweep_tensors(level)
    entries[level] = NO_TANGENT if tangent is None else tangent


def sweep_tensors(level: Level) -> None:
    """Drop the level's references to tensors that no longer exist."""
    level.tensors[:] = [ref for ref in level.tensors if ref() is not None]
    level.sweep_tensors_at = max(_FIRST_SWEEP, 2 * len(level.tensors))


def own_tangent(t: torch.Tensor, level: Level):
    """t's own entry: a tangent, None (explicitly none), or _MISSING."""
    entries = _entries(t)
    if entries is None:
        return MISSING
    value = entries.get(level, MISSING)
    return None if value is NO_TANGENT else value


MISSING = object()


def copy_entries(source: torch.Tensor, target: torch.Tensor) -> None:
    """Give `target` every tangent entry of `source` (an alias standing in for it)."""
    if STATE.pending:
        resolve_pending()
    entries = _entries(source)
    if entries:
        for level, value in entries.items():
            set_tangent(target, level, None if value is NO_TANGENT else value)


def view_of_tangent(
    base_tangent: torch.Tensor, view: torch.Tensor, base: torch.Tensor
) -> torch.Tensor:
    """The tangent of `view` as the same view of its base's tangent.

    A tangent has its primal's layout and conjugate and negative bits, so the
    view is found in memory: the base tangent's memory (bits dropped) taken with
    the view's geometry, and the view's bits applied. A view of another kind of
    dtype (`.real` or `view_as_real` of complex memory, `view_as_complex` of real
    memory) is placed in units of the real dtype."""
    memory = without_lazy_bits(base_tangent)
    offset = view.storage_offset()
    base_offset = base.storage_offset()
    if view.is_complex() == base.is_complex():
        tangent = memory.as_strided(
            view.size(),
            view.stride(),
            offset - base_offset + memory.storage_offset(),
        )
    elif base.is_complex() and memory.is_complex():  # a real view of complex memory
        real = torch.view_as_real(memory)
        tangent = real.as_strided(
            view.size(),
            view.stride(),
            offset - 2 * base_offset + real.storage_offset(),
        )
    elif view.is_complex() and not memory.is_complex():  # complex view of reals
        pairs = memory.as_strided(
            (*view.size(), 2),
            (*(2 * s for s in view.stride()), 1),
            2 * offset - base_offset + memory.storage_offset(),
        )
        tangent = torch.view_as_complex(pairs)
    else:
        raise NotImplementedError(
            f"dualgen cannot derive the tangent of a {view.dtype} view of a "
            f"{base.dtype} tensor whose tangent is {base_tangent.dtype}"
        )
    return with_lazy_bits(tangent, view)


def without_lazy_bits(t: torch.Tensor) -> torch.Tensor:
    """The same memory with the conjugate and negative bits off (a view)."""
    if t.is_conj():
        t = t.conj()
    if t.is_neg():
        t = t._neg_view()
    return t


def with_lazy_bits(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.is_neg():
        t = t._neg_view()
    if like.is_conj():
        t = t.conj()
    return t


FORWARD_BASE = "_dualgen_forward_base"


def forward_base(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor t's tangent is a view of when t has no tangent of its own.

    Usually t's `_base`; but torch collapses chains of views onto the first base,
    and a view of a tensor that has tangents of its own (a make_dual result, the
    primal of `unpack_dual`) must follow that tensor, not the memory's owner."""
    base = t.__dict__.get(FORWARD_BASE)
    return t._base if base is None else base


# A make_dual result or unpack_dual's primal: the levels (weak references) at
# which it is a view of its source, those open when it was made but its own.
FORWARD_ROOT = "_dualgen_forward_root"


def mark_forward_root(t: torch.Tensor, level: Level) -> None:
    """t (made by make_dual or unpack_dual at `level`) keeps its tangent as its
    own there and at every level entered later, as native keeps the forward
    gradients of both (views that are no forward views): a view of it writes
    its first tangent there, and it derives none from its source. At the
    other levels open now it is a view of its source, as the mode made it."""
    t.__dict__[FORWARD_ROOT] = tuple(
        weakref.ref(other) for other in STATE.levels if other is not level
    )


def is_forward_root(t: torch.Tensor, level: Level) -> bool:
    """Whether t's tangent at `level` is its own, never its forward base's."""
    views_at = t.__dict__.get(FORWARD_ROOT)
    return views_at is not None and all(ref() is not level for ref in views_at)


def tangent_owner(t: torch.Tensor, level: Level) -> torch.Tensor | None:
    """The tensor whose tangent at `level` t's tangent is a view of (None: t is
    no view): up t's chain of forward bases, the first with an entry of its own
    at `level` or a root there (`is_forward_root`), else the chain's top. A
    base in between has entries at other levels only (a view given its outer
    level's tangent by the view rule) and follows its own base here, as
    `tangents.tangent_of` reads it: a first tangent given to it would reach
    neither its base nor the base's other views."""
    base = forward_base(t)
    while (
        base is not None
        and own_tangent(base, level) is MISSING
        and not is_forward_root(base, level)
    ):
        up = forward_base(base)
        if up is None:
            break
        base = up
    return base


def note_view(view: torch.Tensor, source: torch.Tensor) -> None:
    """Record that `view` was made from `source` by a view op."""
    base = source.__dict__.get(FORWARD_BASE)
    own = TANGENTS in source.__dict__ or FORWARD_ROOT in source.__dict__
    if own and (base is not None or source._base is not None):
        # source has entries of its own (`unpack_dual(x).primal` says "none"),
        # or is a root (`mark_forward_root`) whose level has ended: its views
        # follow it, not the tensor source itself follows.
        base = source
    if base is not None:  # (inside the mode, torch has not made view a view yet)
        view.__dict__[FORWARD_BASE] = base


def forget_view(t: torch.Tensor) -> None:
    """t no longer follows the tangent of the tensor it was made from."""
    t.__dict__.pop(FORWARD_BASE, None)


def clear_level(level: Level) -> None:
    """Drop every tangent of `level`, leaving the tensors plain at that level."""
    _drop(level)
    level.tensors.clear()
    level.saved.clear()
    level.sweep_tensors_at = _FIRST_SWEEP
    level.pending_works.clear()


def drop_entries(level: Level) -> None:
    for ref in level.tensors:
        t = ref()
        if t is not None:
            entries = _entries(t)
            if entries is not None:
                entries.pop(level, None)
                if not entries:
                    del t.__dict__[TANGENTS]


_drop = drop_entries
