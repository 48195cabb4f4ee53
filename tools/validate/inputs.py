"""Concrete inputs for `dualgen validate`: an entry's samples made into tensors.

Tensor arguments without a declared shape are tried in each default shape (2-d,
0-d and empty); torch itself decides which of them the op accepts. Arguments not
in the sample take the schema default, else a default for their type.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..spec.sample import (
    DERIVED,
    SYMMETRIC_DOMAINS,
    DtypeName,
    NestedSample,
    Sample,
    TensorListSample,
    TensorLiteral,
    TensorSample,
)
from ..spec.schema import parse_schema

DEFAULT_SHAPES = {"2-d": (3, 4), "0-d": (), "empty": (0, 4)}
_TYPE_DEFAULTS = {"int": -1, "SymInt": -1, "bool": False, "float": 0.5, "Scalar": 0.5}


@dataclass(frozen=True)
class Case:
    label: str  # "sample 2, 0-d"
    values: dict  # every argument of the schema, by name
    symmetric: frozenset = frozenset()  # arguments the op sees as (A + A^H)/2
    # Arguments recomputed from others whenever they change: name -> how
    # (StatisticSample, OutputSample).
    statistics: tuple[tuple[str, object], ...] = ()
    # Why torch cannot compute them from the drawn values (an op that runs in
    # other dtypes only): the case does not run.
    refusal: str | None = None

    def with_statistics(self, values: dict) -> dict:
        """`values` with every statistic recomputed from its (new) sources. They
        are computed from their values alone: the rule reads them as functions of
        the sources, so they carry no derivative of their own (and need no rules):
        no mode of ours sees them computed."""
        with _disable_current_modes(), torch.no_grad():
            for name, statistic in self.statistics:
                values[name] = statistic.compute(values)
        return values


def cases_for(
    op: torch._ops.OpOverload,
    samples: tuple[Sample, ...],
    dtype: torch.dtype,
    seed: int,
    device: torch.device | str = "cpu",
) -> list[Case]:
    """The cases of an entry's samples for `op` in `dtype`. The values are drawn
    on the CPU (whatever torch's default device) and moved to `device`, so every
    device sees the same values; statistics are computed there."""
    samples = samples or (Sample((), None),)
    device = torch.device(device)
    # Types as written in the schema: torch reports ScalarType as int.
    written = {
        a.name: a.type.base
        for a in parse_schema(str(op._schema).removeprefix("aten::")).arguments
    }
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for n, sample in enumerate(samples, 1):
        prefix = f"sample {n}" if len(samples) > 1 else "sample"
        declared = dict(sample.values)
        variants = (
            DEFAULT_SHAPES.items() if _has_free_shape(op, declared) else [("", None)]
        )
        for variant, shape in variants:
            with torch.device("cpu"):
                values = {
                    a.name: _value(
                        a, written[a.name], declared, shape, dtype, generator
                    )
                    for a in op._schema.arguments
                }
            if device.type != "cpu":
                values = {name: _moved(v, device) for name, v in values.items()}
            label = f"{prefix}, {variant}" if variant else prefix
            symmetric = frozenset(
                name
                for name, value in declared.items()
                if isinstance(value, TensorSample) and value.domain in SYMMETRIC_DOMAINS
            )
            statistics = tuple(
                (name, value)
                for name, value in declared.items()
                if isinstance(value, DERIVED)
            )
            case = Case(label, values, symmetric, statistics)
            if dtype.is_complex and any(
                isinstance(v, NestedSample) for v in declared.values()
            ):
                # torch's nested tensors take no conj, which every complex
                # gradient (and gradcheck's complex check) needs.
                refusal = (
                    "a nested tensor of complex numbers (torch has no conj of one)"
                )
                cases.append(Case(label, values, symmetric, statistics, refusal))
                continue
            try:
                case.with_statistics(values)
            except Exception as exc:  # noqa: BLE001 - torch refuses the sources
                refusal = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
                case = Case(label, values, symmetric, statistics, refusal)
            cases.append(case)
    return cases


def _moved(value, device: torch.device):
    """A drawn value on `device` (tensors, and those in a list)."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_moved(v, device) for v in value]
    return value


def _is_tensor_argument(argument) -> bool:
    return "Tensor" in str(argument.type)


def _has_free_shape(op, declared: dict) -> bool:
    for a in op._schema.arguments:
        if not _is_tensor_argument(a):
            continue
        default = TensorSample() if _required(a) else None
        value = declared.get(a.name, default)
        if isinstance(value, TensorSample) and value.shape is None:
            return True
        if isinstance(value, TensorListSample) and any(
            isinstance(t, TensorSample) and t.shape is None for t in value.items
        ):
            return True
    return False


def _optional(argument) -> bool:
    return argument.type.kind() == "OptionalType"


def _required(argument) -> bool:
    return not _optional(argument) and not argument.has_default_value()


def _value(argument, base: str, declared: dict, shape, dtype, generator):
    if argument.name in declared:
        value = declared[argument.name]
    elif argument.has_default_value():
        return argument.default_value
    elif _optional(argument):
        return None
    elif argument.type.kind() == "ListType":  # Tensor[]: two of them
        value = TensorListSample((TensorSample(), TensorSample()))
    elif _is_tensor_argument(argument):
        value = TensorSample()
    elif base == "ScalarType":
        return dtype
    else:
        return _TYPE_DEFAULTS[base]  # the generator made every other type declared
    if isinstance(value, DERIVED):
        return None  # computed from its sources once every value is drawn
    if isinstance(value, TensorSample | TensorLiteral):
        return make_tensor(value, shape, dtype, generator)
    if isinstance(value, NestedSample):
        components = [make_tensor(t, shape, dtype, generator) for t in value.items]
        with warnings.catch_warnings():  # (the strided layout is "prototype")
            warnings.filterwarnings("ignore", "The PyTorch API of nested tensors")
            return torch.nested.nested_tensor(components)
    if isinstance(value, TensorListSample):
        return [
            None if t is None else make_tensor(t, shape, dtype, generator)
            for t in value.items
        ]
    if isinstance(value, DtypeName):
        return getattr(torch, value.name)
    if isinstance(value, tuple):
        return list(value)
    return value


_LITERAL_DTYPES = {"int": torch.int64, "bool": torch.bool}


def make_tensor(
    sample: TensorSample | TensorLiteral, default_shape, dtype, generator
) -> torch.Tensor:
    if isinstance(sample, TensorLiteral):  # numbers take the case's dtype
        return torch.tensor(
            sample.values, dtype=_LITERAL_DTYPES.get(sample.kind, dtype)
        )
    shape = sample.shape if sample.shape is not None else default_shape
    if sample.domain == "bool":
        return torch.rand(shape, generator=generator) > 0.5
    if sample.domain == "index":
        return torch.randint(0, sample.high, shape, generator=generator)
    if sample.domain == "pivots":
        # LAPACK's 1-based row swaps: step i swaps row i with one of rows i..high.
        steps = torch.arange(shape[-1], dtype=torch.int32)
        draws = torch.rand(shape, generator=generator, dtype=torch.float64)
        return (steps + 1 + (draws * (sample.high - steps)).int()).to(torch.int32)
    if sample.domain == "unique_index":
        numel = 1
        for size in shape:
            numel *= size
        return torch.randperm(sample.high, generator=generator)[:numel].reshape(shape)
    if sample.domain in ("invertible", "spd", "hermitian"):
        return _matrix(sample.domain, shape, dtype, generator)
    real = _draw(sample.domain, shape, generator)
    if not dtype.is_complex:
        return real.to(dtype)
    imag_domain = {
        "positive": "half",
        "unit": "unit",
        "prob": "half",
        "above_one": "half",
    }.get(sample.domain, "any")
    imag = _draw(imag_domain, shape, generator)
    return torch.complex(real, imag).to(dtype)


def _matrix(domain: str, shape, dtype, generator) -> torch.Tensor:
    """Matrices in the last two dims (a batch before them); anything else is drawn
    from the standard normal."""
    a = make_tensor(TensorSample("any", tuple(shape)), None, dtype, generator)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return a
    n = shape[-1]
    eye = torch.eye(n, dtype=dtype)
    if domain == "invertible":
        return a + n * eye
    if domain == "spd":
        return a @ a.mH / n + eye
    return (a + a.mH) / 2


def _draw(domain: str, shape, generator) -> torch.Tensor:
    f64 = torch.float64
    if domain == "positive":
        return torch.rand(shape, generator=generator, dtype=f64) + 0.5
    if domain == "prob":
        return torch.rand(shape, generator=generator, dtype=f64) * 0.9 + 0.05
    if domain == "above_one":
        return torch.rand(shape, generator=generator, dtype=f64) + 1.2
    if domain == "unit":
        return (torch.rand(shape, generator=generator, dtype=f64) * 2 - 1) * 0.8
    if domain == "half":
        return torch.randn(shape, generator=generator, dtype=f64) * 0.5
    if domain == "nonzero":
        magnitude = torch.rand(shape, generator=generator, dtype=f64) + 0.5
        sign = torch.randint(0, 2, shape, generator=generator).to(f64) * 2 - 1
        return magnitude * sign
    if domain == "distinct":
        n = 1
        for s in shape:
            n *= s
        spread = torch.randperm(n, generator=generator).to(f64) / max(n, 1) * 4 - 2
        return spread.reshape(shape)
    return torch.randn(shape, generator=generator, dtype=f64)
