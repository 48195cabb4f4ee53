"""What the generator knows while it writes a program: the variables so far, as
native forward AD computed them.

Steps are chosen from the actual tensors (shape, dtype, conjugate bit, tangent
presence), so most steps are valid by construction; a line that still raises, or
gives non-finite or huge values, is dropped (`generate.Builder.try_line`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.autograd.forward_ad as native_fwAD
from hypothesis import strategies as st

DrawFn = Callable[[st.SearchStrategy], object]


@dataclass
class Var:
    """A program variable: its name and the tensor native forward AD gave it."""

    name: str
    tensor: torch.Tensor
    input: bool = False  # nested programs: an input (or a view of one)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def ndim(self) -> int:
        return self.tensor.dim()

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor.dtype

    @property
    def is_complex(self) -> bool:
        return self.tensor.is_complex()

    @property
    def has_tangent(self) -> bool:
        return native_fwAD.unpack_dual(self.tensor).tangent is not None

    @property
    def numel(self) -> int:
        return self.tensor.numel()


@dataclass
class GenState:
    """The variables of the program being generated, and its vocabulary's limits:
    `nested` programs only update tensors that do not share an input's memory."""

    vars: list[Var] = field(default_factory=list)
    nested: bool = False
    count: int = 0
    kinds: set[str] = field(default_factory=set)  # shapes written (see `mark`)

    def mark(self, kind: str) -> None:
        """Note that the program has a shape of `kind` (a recipe's line kept)."""
        self.kinds.add(kind)

    def fresh(self) -> str:
        """The name the next defined variable gets."""
        return f"x{self.count}"

    def writable(self, var: Var) -> bool:
        return not (self.nested and var.input)


def pick(draw: DrawFn, state: GenState, cond=None) -> Var | None:
    """A variable satisfying `cond` (any when None), or None if there is none."""
    candidates = [v for v in state.vars if cond is None or cond(v)]
    if not candidates:
        return None
    return draw(st.sampled_from(candidates))


def pick_dim(draw: DrawFn, var: Var) -> int:
    """A dimension of var (0 for a 0-d tensor, which accepts it)."""
    return draw(st.integers(0, max(var.ndim - 1, 0)))


def broadcastable(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """Whether `shape` broadcasts to exactly `to` (as an in-place operand must)."""
    try:
        return torch.broadcast_shapes(shape, to) == torch.Size(to)
    except RuntimeError:
        return False


def compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether two shapes broadcast together."""
    try:
        torch.broadcast_shapes(a, b)
        return True
    except RuntimeError:
        return False
