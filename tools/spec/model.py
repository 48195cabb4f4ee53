"""The model: frozen dataclasses for operator schemas, formulas and spec entries.

Everything parsed from text prints back to the same text (`str(schema)` is the
canonical aten schema). Built by `schema.py` and `build.py`; read by `analyse.py`.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

# The schema records are the runtime's (a leaf module both import): one model of an
# aten schema for the generator and for the runtime's missing-rule messages.
from dualgen.operator_schema import (
    Alias,
    Argument,
    OperatorSchema,
    OpKind,
    Return,
    SchemaType,
    TypeKind,
    python_name,
)

from .errors import Location

__all__ = [
    "Alias",
    "Argument",
    "OpKind",
    "OperatorSchema",
    "Return",
    "SchemaType",
    "TypeKind",
    "python_name",
]


@dataclass(frozen=True)
class Formula:
    """A checked formula: its text as written, its tree, where it came from."""

    source: str
    tree: ast.expr
    location: Location
    origin: str  # "spec", "auto_element_wise", "auto_linear", "view", ...

    def __post_init__(self) -> None:
        assert isinstance(self.tree, ast.expr), self.tree


@dataclass(frozen=True)
class BackwardFormula:
    """`self, other: f(grad)`: the gradients of `inputs` (a tuple when several)."""

    inputs: tuple[str, ...]
    formula: Formula


class Auto(enum.Enum):
    ELEMENT_WISE = "auto_element_wise"
    LINEAR = "auto_linear"


@dataclass(frozen=True)
class ForwardFormula:
    """The tangent of one output: a formula, or an `auto_*` marker still to derive."""

    output: str
    formula: Formula | None
    auto: Auto | None
    location: Location


# Conventions an entry's formulas may state instead of the derivative, and what
# they mean. Finite differences cannot check them; `dualgen validate` checks the
# forward formulas against the backward ones (the adjoint check), and the kernel
# tests the backward formulas against autograd's, which define the convention.
CONVENTIONS = {
    "straight-through": (
        "the straight-through estimator autograd uses for rounding (the gradient "
        "passes where the input was in range), not rounding's derivative, which "
        "is zero almost everywhere"
    ),
    "implicit-reparameterization": (
        "a random draw's implicit reparameterization derivative in its parameter "
        "(the draw with its CDF value held fixed), which autograd uses, not the "
        "derivative of the seeded sampler's map that finite differences see"
    ),
}


Release = tuple[int, int]  # (major, minor) of a torch release


@dataclass(frozen=True)
class TorchReleases:
    """`torch_releases: ">=2.14"` (or `"<2.14"`, or both, comma-separated): the
    torch releases that have an entry's overload, the first that has it (`low`)
    and the first that no longer has it (`high`)."""

    text: str
    low: Release | None
    high: Release | None

    def __contains__(self, release: Release) -> bool:
        return (self.low is None or release >= self.low) and (
            self.high is None or release < self.high
        )


@dataclass(frozen=True)
class Entry:
    """One checked spec entry."""

    schema: OperatorSchema
    location: Location
    backward: tuple[BackwardFormula, ...]
    forward: tuple[ForwardFormula, ...]
    non_differentiable: tuple[str, ...]
    output_differentiability: tuple[bool, ...]
    # An in-place entry written with no formulas takes them from this functional entry.
    inherits_from: str | None = None
    samples: tuple = ()  # tools.spec.sample.Sample, for `dualgen validate`
    # The formulas state a convention, not the derivative (CONVENTIONS).
    convention: str | None = None
    # The torch releases that have the overload; None: every supported release.
    torch_releases: TorchReleases | None = None

    @property
    def differentiable_inputs(self) -> tuple[Argument, ...]:
        names = {n for b in self.backward for n in b.inputs}
        return tuple(a for a in self.schema.arguments if a.name in names)

    @property
    def differentiable_outputs(self) -> tuple[str, ...]:
        return tuple(
            name
            for name, diff in zip(
                self.schema.output_names(), self.output_differentiability
            )
            if diff
        )


@dataclass(frozen=True)
class CollectiveEntry:
    """A collective's entry: how its values and their tangents share a message.

    The JVP of a linear collective is the same collective of the tangents; the
    runtime sends each value and its tangent in one message (`packing`:
    "element_wise" for collectives that treat each element alone, "rows" for
    those that move rows along dim 0) and reduces MAX, MIN and PRODUCT by their
    own rules. "passes_through": the op returns its input, tangent and all;
    "no_data": its tensor is a token (barriers)."""

    schema: OperatorSchema
    location: Location
    packing: str
    sends: tuple[str, ...] = ()  # arguments whose tensors the collective sends
    receives: tuple[str, ...] = ()  # arguments whose tensors it writes (in place)
    reduce: str | None = None  # the argument naming the reduce kind
    root: str | None = None  # the argument naming the only rank that receives
    scatters: bool = False  # each rank keeps one chunk of the reduction
    returns_new: bool = False  # returns new tensors (a functional collective)


PACKINGS = ("element_wise", "rows", "passes_through", "no_data")


@dataclass(frozen=True)
class Spec:
    path: str
    entries: tuple[Entry, ...]
    collectives: tuple[CollectiveEntry, ...] = ()
