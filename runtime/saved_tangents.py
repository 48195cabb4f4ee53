"""How long a level keeps the tangent of an output autograd may save.

A level's saved outputs (levels.SavedOutputs) find an output's tangent again when
autograd rebuilds the output from its saved copy, and keep the entry while the
output's memory lives. Where the tangent has a graph of its own (forward AD
under grad mode with parameters that require grad: every forward-gradient
training step) that graph may hold the output's memory (tanh's tangent saves
tanh's result), so an entry holding the tangent would hold the memory and keep
itself alive for the whole level: a training loop in one level would keep every
step's activations (native forward AD keeps them too, until the level ends).

Only one reader ever needs the entry: the autograd node that saved the output,
when a backward pass unpacks it. So the entry holds such a tangent weakly, and
the node holds it: at the next op the mode sees (autograd has recorded the
output's op by then) the tangent moves onto a pre-hook of the output's
`grad_fn`, and dies with that node. An output nobody consumed by then is never
unpacked: its entry lets the tangent go. Until then, and wherever the node
cannot be reached, the entry holds the tangent as before.
"""

from __future__ import annotations

import weakref

import torch

from .levels import STATE, Level

# Tries before an output whose op autograd has not recorded yet keeps its
# tangent in the entry (the mode runs ops inside another op's handling too).
_TRIES = 64


class SavedTangent:
    """A saved output's tangent at one level: alive while the entry or the
    output's node holds it (`strong` until it moves to the node)."""

    __slots__ = ("live", "strong")

    def __init__(self, tangent: torch.Tensor) -> None:
        self.live = weakref.ref(tangent)
        self.strong: torch.Tensor | None = tangent

    def resolve(self) -> torch.Tensor | None:
        return self.live()


class _HeldByNode:
    """A pre-hook that changes nothing: it keeps the tangent as long as the node
    and the output's memory, or until its level ends (`forget_saved_tangents`).

    The memory matters where saved-tensor hooks pack what the node saves:
    torch.utils.checkpoint's let the output's memory go (its backward recomputes
    the output, tangent included), and a hook that copies the output (to the CPU,
    to disk) unpacks a tensor no entry describes. Either way the tangent is never
    read again, and holding it would undo the checkpoint's saving."""

    __slots__ = ("__weakref__", "_memory", "tangent")

    def __init__(self, tangent: torch.Tensor, output: torch.Tensor) -> None:
        self.tangent = tangent
        me = weakref.ref(self)
        self._memory = weakref.ref(output.untyped_storage(), lambda _: _release(me))

    def __call__(self, grad_outputs):
        return None


def _release(holder_ref) -> None:
    holder = holder_ref()
    if holder is not None:
        holder.tangent = None


class _ToMove:
    __slots__ = ("level", "output", "saved", "tries")

    def __init__(self, level: Level, output: torch.Tensor, saved: SavedTangent):
        self.level = level
        self.output = weakref.ref(output)
        self.saved = saved
        self.tries = 0

    def settled(self) -> bool:
        """Move the tangent onto the output's node (or let it go); False to try
        again at a later op."""
        output = self.output()
        if output is None:
            self.saved.strong = None  # never consumed: nothing will unpack it
            return True
        node = output.grad_fn
        if node is None:
            self.tries += 1
            return self.tries >= _TRIES  # (then the entry keeps it)
        holder = _HeldByNode(self.saved.strong, output)
        node.register_prehook(holder)
        _HELD.setdefault(self.level, weakref.WeakSet()).add(holder)
        self.saved.strong = None
        return True


# The holders on nodes, per level, to empty when the level ends (the graph, and
# so the node, may outlive the level; its tangents must not).
_HELD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def saved_form(entries: dict, level: Level, output: torch.Tensor) -> dict:
    """What `level`'s saved outputs keep of `output`'s tangent entries: the entries
    themselves, or, where the tangent has a graph, a SavedTangent that moves to
    the output's node at the next op."""
    tangent = entries.get(level)
    if not isinstance(tangent, torch.Tensor) or not tangent.requires_grad:
        return entries
    saved = SavedTangent(tangent)
    STATE.saved_to_move.append(_ToMove(level, output, saved))
    return {level: saved}


def move_saved_tangents() -> None:
    """Settle the saved tangents remembered since the last op (`saved_form`)."""
    waiting, STATE.saved_to_move = STATE.saved_to_move, []
    STATE.saved_to_move += [item for item in waiting if not item.settled()]


def forget_saved_tangents(level: Level) -> None:
    """The level ends: its saved outputs' tangents go with it."""
    STATE.saved_to_move = [i for i in STATE.saved_to_move if i.level is not level]
    for holder in _HELD.pop(level, ()):
        holder.tangent = None
