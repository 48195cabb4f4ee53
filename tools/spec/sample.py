"""The `sample:` vocabulary: what an entry's inputs must look like for validation.

    sample: self=positive                          one sample
    sample:                                        several: a YAML block list
      - self=any(3, 4), size=[4, 3]
      - self=any(), size=[]

Each sample is keyword arguments, parsed as a Python call (never executed). Tensor
arguments take a domain, alone (shapes chosen by `dualgen validate`: 2-d, 0-d and
empty) or called with a shape (`positive(3, 4)`, `any()` for 0-d); a Tensor[]
argument takes a list of them (a Tensor?[] may hold None). A Tensor argument may be
None: the undefined tensor that C++ callers may pass even where the schema says
`Tensor` (autograd calls the dense flash backward so). Other arguments take
literals of their type (ints, numbers with `inf` and `nan`, bools, None, lists of
ints, numbers (float[], Scalar[]) or bools; dtype names for ScalarType; an
argument named like a Python keyword takes a trailing underscore: `from_=2`).
Arguments left out take their schema default, or a default for their type; an
argument with neither must be given.

Where the values matter (repeated indices, a target that hits ignore_index, a
mask, -inf in a softmax row), a tensor may be written out:

    index=tensor([0, 2, 2])          ints: int64
    mask=tensor([[True], [False]])   bools: a bool mask
    self=tensor([nan, inf, -1.5])    numbers: floating, in the case's dtype

A tensor argument may instead be a statistic of another one, recomputed from it
whenever validation perturbs it, so the op sees statistics consistent with its
input (the saved mean and rstd a norm's backward op reads):

    save_mean=mean_of(input, dims=[0, 2])              mean over dims
    save_invstd=rstd_of(input, dims=[0, 2], eps=1e-5)  1 / sqrt(biased var + eps)
    mean=mean_of(input, dims=[2], keepdim=True)

A strided nested tensor takes its components (each a domain with a shape, or
written out), all with the same number of dims:

    self=nested(any(2, 3), any(4, 3))

Or an output of another aten op, called with this op's arguments (by name) and
literals, recomputed whenever validation perturbs them: the state a fused
kernel's backward op reads from its forward op (a workspace, saved outputs):

    workspace=output_of(mkldnn_rnn_layer, 3, input=input, hx_=hx_, reverse=False)

Such an argument must be non-differentiable: its rule takes it as a function of
its sources.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch

from .errors import Location
from .model import Argument, TypeKind

# How random values are drawn for a tensor argument.
DOMAINS = {
    "any": "standard normal",
    "positive": "in [0.5, 1.5) (complex: positive real part)",
    "unit": "in (-0.8, 0.8) (complex: both parts)",
    "nonzero": "at least 0.5 away from 0",
    "distinct": "no two equal (no ties for max, sort, ...)",
    "bool": "random booleans (a non-differentiable mask)",
    "prob": "in (0.05, 0.95): probabilities",
    "above_one": "in [1.2, 2.2) (acosh)",
    "invertible": "standard normal plus n on the diagonal of the last two dims",
    "spd": "Hermitian positive definite in the last two dims; the op sees (A + A^H)/2",
    "hermitian": "Hermitian in the last two dims; the op sees (A + A^H)/2",
    "index": "int64 in [0, high): `index(2, 3, high=5)`",
    "unique_index": "distinct int64 in [0, high): `unique_index(2, high=5)`",
    "pivots": "int32 LU pivots of a matrix of `high` rows: `pivots(2, 3, high=3)`",
}
INDEX_DOMAINS = ("index", "unique_index", "pivots")
# Domains of matrices whose op reads one triangle: validate passes the op the
# Hermitian part of the input, so every perturbation gradcheck makes stays in
# the domain and the derivative is that of a function of the whole matrix.
SYMMETRIC_DOMAINS = ("spd", "hermitian")
DTYPES = ("float64", "float32", "complex128", "complex64", "int64", "bool")


@dataclass(frozen=True)
class TensorSample:
    domain: str = "any"
    shape: tuple[int, ...] | None = None  # None: the default shapes
    high: int | None = None  # index domains: values below this


@dataclass(frozen=True)
class StatisticSample:
    """A statistic of another tensor argument (`source`) over `dims`."""

    kind: str  # "mean" or "rstd"
    source: str
    dims: tuple[int, ...]
    keepdim: bool = False
    eps: float = 0.0

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source,)

    def compute(self, values: dict):
        """The statistic, from the case's values by argument name."""
        return self.of(values[self.source])

    def of(self, source):
        """The statistic of `source`, the tensor the op is given."""
        mean = source.mean(self.dims, keepdim=self.keepdim)
        if self.kind == "mean":
            return mean
        var = source.var(self.dims, correction=0, keepdim=self.keepdim)
        return (var + self.eps).rsqrt()


STATISTICS = {"mean_of": "mean", "rstd_of": "rstd"}


@dataclass(frozen=True)
class ArgumentName:
    """An argument of the entry's op, by name, inside `output_of(...)`."""

    name: str


@dataclass(frozen=True)
class OutputSample:
    """Output `index` of the aten overload `op` ("name" or "name.overload") called
    with `arguments`: keyword -> ArgumentName (this op's argument) or a literal."""

    op: str
    index: int
    arguments: tuple[tuple[str, object], ...]

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(v.name for _, v in self.arguments if isinstance(v, ArgumentName))

    def compute(self, values: dict):
        """The output, from the case's values by argument name."""
        kwargs = {
            k: values[v.name] if isinstance(v, ArgumentName) else v
            for k, v in self.arguments
        }
        # As in training: with grad mode off, fused kernels keep no workspace.
        with torch.enable_grad():
            return aten_overload(self.op)(**kwargs)[self.index]


# Arguments computed from others (whenever validation perturbs them).
DERIVED = (StatisticSample, OutputSample)


def aten_overload(name: str):
    """torch.ops.aten.NAME.OVERLOAD for "NAME" or "NAME.OVERLOAD"; None if torch has
    none."""
    base, _, overload = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


@dataclass(frozen=True)
class TensorLiteral:
    """A tensor written out: `tensor([[0, 2], [1, 3]])`."""

    values: tuple  # nested tuples, as written
    kind: str  # "int" (int64), "bool", or "float" (the case's dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        shape, level = [], self.values
        while isinstance(level, tuple):
            shape.append(len(level))
            level = level[0] if level else None
        return tuple(shape)


@dataclass(frozen=True)
class TensorListSample:
    items: tuple[TensorSample | TensorLiteral | None, ...]  # None: Tensor?[] only


@dataclass(frozen=True)
class NestedSample:
    """A strided nested tensor of these components: `nested(any(2, 3), any(4, 3))`."""

    items: tuple[TensorSample | TensorLiteral, ...]


@dataclass(frozen=True)
class DtypeName:
    name: str  # "float64", ...


@dataclass(frozen=True)
class Sample:
    """One sample: the declared values, by argument name."""

    values: tuple[tuple[str, object], ...]
    location: Location

    def get(self, name: str, default=None):
        return dict(self.values).get(name, default)


class SampleError(Exception):
    pass


def parse_sample(
    text: str, arguments: dict[str, Argument], location: Location
) -> Sample:
    try:
        tree = ast.parse(f"sample({text})", mode="eval").body
    except SyntaxError:
        raise SampleError(f"sample is not `name=value, ...`: {text!r}") from None
    if (
        not isinstance(tree, ast.Call)
        or tree.args
        or any(k.arg is None for k in tree.keywords)
    ):
        raise SampleError(f"sample is not `name=value, ...`: {text!r}")
    values = []
    # An argument named like a Python keyword (`from`) is written `from_`.
    by_py_name = {a.py_name: a for a in arguments.values()}
    for keyword in tree.keywords:
        argument = by_py_name.get(keyword.arg)
        if argument is None:
            raise SampleError(f"sample names '{keyword.arg}', which is not an argument")
        values.append((argument.name, _value(keyword.value, argument)))
    given = dict(values)
    for name, value in values:
        for source in value.sources if isinstance(value, DERIVED) else ():
            if not isinstance(given.get(source), TensorSample | TensorLiteral):
                raise SampleError(
                    f"'{name}' is computed from '{source}', which the sample "
                    f"does not give as a tensor"
                )
    return Sample(tuple(values), location)


def _value(node: ast.expr, argument: Argument):
    kind = argument.kind
    what = f"sample value for '{argument.name}' ({argument.type})"
    if kind in (TypeKind.TENSOR, TypeKind.OPTIONAL_TENSOR):
        # None for a plain Tensor: the undefined tensor C++ callers may pass there
        # (autograd gives the dense flash backward an undefined cum_seq_q).
        if _is_none(node):
            return None
        return _tensor(node, what)
    if kind in (TypeKind.TENSOR_LIST, TypeKind.OPTIONAL_TENSOR_LIST):
        if not isinstance(node, ast.List) or not node.elts:
            raise SampleError(
                f"{what} must be a list of tensors, like [any(2), any(3)]"
            )
        optional = kind is TypeKind.OPTIONAL_TENSOR_LIST
        return TensorListSample(
            tuple(
                None if optional and _is_none(e) else _tensor(e, what)
                for e in node.elts
            )
        )
    t = argument.type
    if t.suffix.endswith("?") and _is_none(node):
        return None
    base, suffix = t.base, t.suffix.rstrip("?")
    if base in ("int", "SymInt") and suffix == "":
        return _int(node, what)
    if base in ("int", "SymInt") and suffix.startswith("["):
        if isinstance(node, ast.List | ast.Tuple):
            return tuple(_int(e, what) for e in node.elts)
        if suffix == "[1]":
            return (_int(node, what),)
        raise SampleError(f"{what} must be a list of ints")
    if base in ("float", "Scalar") and suffix == "":
        return _number(node, what)
    if base in ("float", "Scalar") and suffix.startswith("["):
        if not isinstance(node, ast.List | ast.Tuple):
            raise SampleError(f"{what} must be a list of numbers")
        return tuple(_number(e, what) for e in node.elts)
    if base == "bool" and suffix.startswith("["):
        values = (
            tuple(_literal(e, what) for e in node.elts)
            if isinstance(node, ast.List | ast.Tuple)
            else ()
        )
        if not values or not all(isinstance(v, bool) for v in values):
            raise SampleError(f"{what} must be a list of true/false (True/False)")
        return values
    if base == "bool" and suffix == "":
        value = _literal(node, what)
        if not isinstance(value, bool):
            raise SampleError(f"{what} must be true or false (True/False)")
        return value
    if base == "str" and suffix == "":
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            raise SampleError(f"{what} must be a string")
        return node.value
    if base == "ScalarType" and suffix == "":
        if not isinstance(node, ast.Name) or node.id not in DTYPES:
            raise SampleError(f"{what} must be a dtype name: {', '.join(DTYPES)}")
        return DtypeName(node.id)
    raise SampleError(f"{what}: samples of this type are not supported")


def _tensor(
    node: ast.expr, what: str
) -> TensorSample | StatisticSample | OutputSample | TensorLiteral:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in STATISTICS
    ):
        return _statistic(node, what)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "output_of"
    ):
        return _output_of(node, what)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "tensor"
    ):
        return _tensor_literal(node, what)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "nested"
    ):
        return _nested(node, what)
    if isinstance(node, ast.Name):
        if node.id in INDEX_DOMAINS:
            raise SampleError(f"{what}: {node.id} needs a bound: {node.id}(high=N)")
        return TensorSample(_domain(node.id, what))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        domain = _domain(node.func.id, what)
        shape = tuple(_int(a, what) for a in node.args)
        if any(s < 0 for s in shape):
            raise SampleError(f"{what}: a shape cannot be negative")
        keywords = {k.arg: k.value for k in node.keywords}
        if domain not in INDEX_DOMAINS:
            if keywords:
                raise SampleError(f"{what}: only index domains take high=")
            return TensorSample(domain, shape)
        if set(keywords) != {"high"}:
            raise SampleError(f"{what}: {domain} takes one keyword, high=N")
        high = _int(keywords["high"], what)
        numel = 1
        for size in shape:
            numel *= size
        if high < 1 or (domain == "unique_index" and numel > high):
            raise SampleError(f"{what}: high={high} cannot give {numel} indices")
        if domain == "pivots" and (not shape or shape[-1] > high):
            raise SampleError(
                f"{what}: pivots need a shape of at most {high} in the last dim"
            )
        return TensorSample(domain, shape or None, high)
    raise SampleError(
        f"{what} must be a domain ({', '.join(DOMAINS)}), optionally with a shape: "
        f"positive(3, 4), or written out: tensor([0, 2])"
    )


def _nested(node: ast.Call, what: str) -> NestedSample:
    usage = (
        f"{what}: write nested(any(2, 3), any(4, 3)): components with shapes of "
        "the same number of dims"
    )
    if not node.args or node.keywords:
        raise SampleError(usage)
    items = tuple(_tensor(a, what) for a in node.args)
    shapes = [item.shape for item in items]
    if (
        any(
            not isinstance(item, TensorSample | TensorLiteral) or shape is None
            for item, shape in zip(items, shapes)
        )
        or len({len(shape) for shape in shapes}) != 1
    ):
        raise SampleError(usage)
    return NestedSample(items)


def _tensor_literal(node: ast.Call, what: str) -> TensorLiteral:
    usage = f"{what}: write tensor([...]) with ints, bools or numbers"
    if len(node.args) != 1 or node.keywords:
        raise SampleError(usage)

    def nested(n: ast.expr):
        if isinstance(n, ast.List | ast.Tuple):
            return tuple(nested(e) for e in n.elts)
        try:
            return _literal(n, what)
        except SampleError:
            raise SampleError(usage) from None

    values = nested(node.args[0])
    if not isinstance(values, tuple) or not values:
        raise SampleError(f"{usage} (an empty tensor is a domain: any(0))")
    leaves: list = []
    literal = TensorLiteral(values, "float")
    if not _rectangular(values, literal.shape, leaves):
        raise SampleError(f"{what}: tensor([...]) rows must have equal lengths")
    if all(isinstance(v, bool) for v in leaves):
        kind = "bool"
    elif any(isinstance(v, bool) for v in leaves):
        raise SampleError(f"{what}: tensor([...]) mixes bools and numbers")
    elif all(isinstance(v, int) for v in leaves):
        kind = "int"
    else:
        kind = "float"
    return TensorLiteral(values, kind)


def _rectangular(values, shape: tuple[int, ...], leaves: list) -> bool:
    """True if nested `values` have `shape` exactly; collects the leaves."""
    if not shape:
        leaves.append(values)
        return not isinstance(values, tuple)
    if not isinstance(values, tuple) or len(values) != shape[0]:
        return False
    return all(_rectangular(v, shape[1:], leaves) for v in values)


def _statistic(node: ast.Call, what: str) -> StatisticSample:
    usage = f"{what}: write {node.func.id}(source, dims=[...]"
    usage += ", eps=...)" if node.func.id == "rstd_of" else ")"
    keywords = {k.arg: k.value for k in node.keywords}
    allowed = {"dims", "keepdim"} | ({"eps"} if node.func.id == "rstd_of" else set())
    if (
        len(node.args) != 1
        or not isinstance(node.args[0], ast.Name)
        or "dims" not in keywords
        or not set(keywords) <= allowed
        or not isinstance(keywords["dims"], ast.List | ast.Tuple)
    ):
        raise SampleError(usage)
    dims = tuple(_int(d, what) for d in keywords["dims"].elts)
    keepdim = _literal(keywords["keepdim"], what) if "keepdim" in keywords else False
    if not isinstance(keepdim, bool):
        raise SampleError(f"{what}: keepdim must be True or False")
    eps = _literal(keywords["eps"], what) if "eps" in keywords else 0.0
    if isinstance(eps, bool) or not isinstance(eps, int | float) or eps < 0:
        raise SampleError(f"{what}: eps must be a number at least 0")
    return StatisticSample(
        STATISTICS[node.func.id], node.args[0].id, dims, keepdim, float(eps)
    )


def _output_of(node: ast.Call, what: str) -> OutputSample:
    usage = f"{what}: write output_of(op, index, argument=name or literal, ...)"
    if len(node.args) != 2 or any(k.arg is None for k in node.keywords):
        raise SampleError(usage)
    op_node, index_node = node.args
    op_name = _dotted(op_node)
    if op_name is None:
        raise SampleError(usage)
    op = aten_overload(op_name)
    if op is None:
        raise SampleError(f"{what}: torch has no operator aten::{op_name}")
    index = _int(index_node, what)
    if not 0 <= index < len(op._schema.returns):
        raise SampleError(f"{what}: aten::{op_name} has no output {index}")
    parameters = {a.name for a in op._schema.arguments}
    arguments = []
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            raise SampleError(
                f"{what}: aten::{op_name} has no argument '{keyword.arg}'"
            )
        value = keyword.value
        if isinstance(value, ast.Name) and value.id not in _NAMED_NUMBERS:
            arguments.append((keyword.arg, ArgumentName(value.id)))
        elif isinstance(value, ast.List):
            arguments.append((keyword.arg, [_literal(v, what) for v in value.elts]))
        else:
            arguments.append((keyword.arg, _literal(value, what)))
    return OutputSample(op_name, index, tuple(arguments))


def _dotted(node: ast.expr) -> str | None:
    """`name` or `name.overload` as written, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _domain(name: str, what: str) -> str:
    if name not in DOMAINS:
        raise SampleError(
            f"{what}: unknown domain '{name}' (one of {', '.join(DOMAINS)})"
        )
    return name


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _int(node: ast.expr, what: str) -> int:
    value = _literal(node, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SampleError(f"{what} must be an int")
    return value


def _number(node: ast.expr, what: str) -> int | float:
    number = _literal(node, what)
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise SampleError(f"{what} must be a number")
    return number


# Numbers Python writes as names.
_NAMED_NUMBERS = {"inf": float("inf"), "nan": float("nan")}


def _literal(node: ast.expr, what: str):
    if isinstance(node, ast.Name) and node.id in _NAMED_NUMBERS:
        return _NAMED_NUMBERS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, what)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SampleError(f"{what} must be a literal")
        return -value
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | bool):
        return node.value
    raise SampleError(f"{what} must be a literal")
