"""jacfwd's `randomness` flag, over the passes that compute its columns.

torch.func.jacfwd runs its function under torch.vmap, whose flag decides what a
random op does. dualgen's jacfwd runs it on its plain primals once a pass; the
legacy vmap that batches its tangents refuses random ops, so a function that draws
is computed one column a pass (`jacobian.py`). Across passes:
- "error": a pass that changed the default generators' state (CPU, and CUDA once
  initialised) drew random numbers: it raises torch.func's error, the state put
  back. A random op given a generator of its own is not seen.
- "same": each pass starts from the state the first one started from, so every
  column sees the same draws.
- "different": each pass draws anew, from where the last left.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["RANDOM_OP_ERROR", "Randomness", "RngState"]

RANDOM_OP_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either "
    "use the 'same' or 'different' randomness flags on vmap or perform the "
    "randomness operation out of vmap"
)


@dataclass(frozen=True)
class RngState:
    """The default generators' state: CPU's, and each CUDA device's if CUDA is
    initialised (empty otherwise)."""

    cpu: torch.Tensor
    cuda: tuple[torch.Tensor, ...]

    @classmethod
    def take(cls) -> RngState:
        cuda = (
            tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_initialized() else ()
        )
        return cls(torch.get_rng_state(), cuda)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda:
            torch.cuda.set_rng_state_all(self.cuda)

    def same_as(self, other: RngState) -> bool:
        if not torch.equal(self.cpu, other.cpu):
            return False
        if len(self.cuda) != len(other.cuda):  # CUDA initialised in between
            return True
        return all(torch.equal(a, b) for a, b in zip(self.cuda, other.cuda))


class Randomness:
    """One jacfwd call's handling of random draws across its passes."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.first: RngState | None = None  # where the first pass started

    def one_pass(self) -> _Pass:
        return _Pass(self)


class _Pass:
    """One pass under a `Randomness` (a class, not a generator: every jacfwd
    call enters one)."""

    __slots__ = ("before", "randomness")

    def __init__(self, randomness: Randomness) -> None:
        self.randomness = randomness
        self.before: RngState | None = None

    def __enter__(self) -> None:
        randomness = self.randomness
        if randomness.mode == "different":
            return
        self.before = RngState.take()
        if randomness.mode == "same":
            if randomness.first is None:
                randomness.first = self.before
            else:
                randomness.first.restore()

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None or self.randomness.mode != "error":
            return
        before = self.before
        if not RngState.take().same_as(before):
            before.restore()
            raise RuntimeError(RANDOM_OP_ERROR)
