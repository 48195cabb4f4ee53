"""The model: frozen dataclasses for operator schemas, formulas and spec entries.

Everything parsed from text prints back to the same text (`str(schema)` is the
canonical aten schema). Built by `schema.py` and `build.py`; read by `analyse.py`.
"""

from __future__ import annotations

import ast
import enum
import keyword
from dataclasses import dataclass

from .errors import Location


class TypeKind(enum.Enum):
    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_TENSOR_LIST = "Tensor?[]"
    OTHER = "other"

    @property
    def is_tensor_like(self) -> bool:
        return self is not TypeKind.OTHER

    @property
    def is_list(self) -> bool:
        return self in (TypeKind.TENSOR_LIST, TypeKind.OPTIONAL_TENSOR_LIST)


@dataclass(frozen=True)
class Alias:
    """An alias annotation: `a`, `a!` (written to), `a -> *` (aliases a list)."""

    text: str

    @property
    def is_write(self) -> bool:
        return self.text.split("->")[0].strip().endswith("!")

    @property
    def set_name(self) -> str:
        return self.text.split("->")[0].strip().rstrip("!")


@dataclass(frozen=True)
class SchemaType:
    base: str  # "Tensor", "int", "SymInt", "Scalar", ...
    alias: Alias | None
    suffix: str  # "", "?", "[]", "[1]?", "?[]", ...
    alias_after_suffix: bool = False  # `Tensor[](a)` rather than `Tensor(a)[]`

    def __str__(self) -> str:
        alias = f"({self.alias.text})" if self.alias else ""
        if self.alias_after_suffix:
            return f"{self.base}{self.suffix}{alias}"
        return f"{self.base}{alias}{self.suffix}"

    @property
    def kind(self) -> TypeKind:
        if self.base != "Tensor":
            return TypeKind.OTHER
        return {
            "": TypeKind.TENSOR,
            "?": TypeKind.OPTIONAL_TENSOR,
            "[]": TypeKind.TENSOR_LIST,
            "?[]": TypeKind.OPTIONAL_TENSOR_LIST,
        }.get(self.suffix, TypeKind.OTHER)


@dataclass(frozen=True)
class Argument:
    name: str
    type: SchemaType
    default: str | None
    kwarg_only: bool

    def __str__(self) -> str:
        default = f"={self.default}" if self.default is not None else ""
        return f"{self.type} {self.name}{default}"

    @property
    def kind(self) -> TypeKind:
        return self.type.kind

    @property
    def py_name(self) -> str:
        """The argument's name as a Python identifier (`from` becomes `from_`)."""
        return python_name(self.name)


@dataclass(frozen=True)
class Return:
    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return f"{self.type} {self.name}" if self.name else str(self.type)


class OpKind(enum.Enum):
    FUNCTIONAL = "functional"
    INPLACE = "inplace"
    OUT = "out"
    VIEW = "view"


@dataclass(frozen=True)
class OperatorSchema:
    name: str  # "add_"
    overload: str  # "Tensor", or "" for the default overload
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    # "aten", or a custom op's library ("mylib" for torch.library.custom_op
    # ("mylib::softclip")). Aten names are written bare, the others qualified.
    namespace: str = "aten"

    def __str__(self) -> str:
        args: list[str] = []
        star = False
        for arg in self.arguments:
            if arg.kwarg_only and not star:
                args.append("*")
                star = True
            args.append(str(arg))
        if len(self.returns) == 1:
            returns = str(self.returns[0])
        else:
            returns = "(" + ", ".join(str(r) for r in self.returns) + ")"
        return f"{self.full_name}({', '.join(args)}) -> {returns}"

    @property
    def full_name(self) -> str:
        """`add_.Tensor`, or `add_` for the default overload; `mylib::softclip` for
        an operator outside aten."""
        return self.qualify(
            f"{self.name}.{self.overload}" if self.overload else self.name
        )

    @property
    def is_aten(self) -> bool:
        return self.namespace == "aten"

    def qualify(self, name: str) -> str:
        """`name` (of this schema's namespace) as the spec writes it: bare for aten,
        `ns::name` otherwise."""
        return name if self.is_aten else f"{self.namespace}::{name}"

    @property
    def qualified(self) -> str:
        """The schema with its namespace, as torch prints it: `aten::add.Tensor(...)`."""
        return f"aten::{self}" if self.is_aten else str(self)

    @property
    def operator_key(self) -> str:
        """`aten::add.Tensor`, `mylib::softclip.default`: the overload's name in
        the runtime."""
        return f"{self.namespace}::{self.name}.{self.overload_attr}"

    @property
    def overload_attr(self) -> str:
        """The attribute of the OpOverloadPacket: `Tensor`, or `default`."""
        return self.overload or "default"

    @property
    def kernel_name(self) -> str:
        """A Python identifier naming this overload's kernels: `add__Tensor`."""
        kernel = f"{self.name}_{self.overload_attr}"
        return kernel if self.is_aten else f"{self.namespace}_{kernel}"

    def argument(self, name: str) -> Argument | None:
        for arg in self.arguments:
            if arg.name == name:
                return arg
        return None

    @property
    def kind(self) -> OpKind:
        if any(
            a.kwarg_only and a.type.alias and a.type.alias.is_write
            for a in self.arguments
        ):
            return OpKind.OUT
        first = self.arguments[0] if self.arguments else None
        if (
            first is not None
            and first.name == "self"
            and first.type.alias is not None
            and first.type.alias.is_write
            and self.name.endswith("_")
        ):
            return OpKind.INPLACE
        if any(
            r.type.alias is not None and not r.type.alias.is_write for r in self.returns
        ):
            return OpKind.VIEW
        return OpKind.FUNCTIONAL

    @property
    def functional_name(self) -> str:
        """`add.Tensor` for `add_.Tensor`: the out-of-place overload's full name."""
        base = self.name.removesuffix("_")
        return self.qualify(f"{base}.{self.overload}" if self.overload else base)

    def output_names(self) -> tuple[str, ...]:
        """Names formulas use for the outputs: `result` alone, else `result0`, ... or
        the schema's own names where it gives them."""
        if len(self.returns) == 1:
            return ("result",)
        return tuple(r.name or f"result{i}" for i, r in enumerate(self.returns))


def python_name(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) else name


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
    samples: tuple = ()  # tools.sample.Sample, for `dualgen validate`
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
