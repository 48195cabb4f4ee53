"""Calls generated kernels and the same ops under native PyTorch AD, for comparison."""

from __future__ import annotations

import itertools

import torch
from samples import Sample, T

FLOATING = (torch.float64, torch.complex128)


def make(value, dtype: torch.dtype, gen: torch.Generator):
    """Materialise the `T` placeholders of a sample in `dtype`."""
    if isinstance(value, list):
        return [make(v, dtype, gen) for v in value]
    if not isinstance(value, T):
        return value
    if value.dtype is torch.bool:
        return torch.rand(value.shape, generator=gen) > 0.5
    real = torch.float64
    if value.domain == "distinct":
        n = max(1, int(torch.tensor(value.shape).prod().item()) if value.shape else 1)
        x = (torch.randperm(n, generator=gen).to(real) - n / 2) * 0.1 + 0.05
        x = x[: max(n, 0)].reshape(value.shape) if value.shape else x[0]
    else:
        x = torch.randn(value.shape, generator=gen, dtype=real)
    if value.domain == "positive":
        x = x.abs() + 0.5
    elif value.domain == "unit":
        x = torch.rand(value.shape, generator=gen, dtype=real) * 1.6 - 0.8
    elif value.domain == "nonzero":
        x = x.sign() * (x.abs() + 0.1)
    elif value.domain == "prob":
        x = torch.rand(value.shape, generator=gen, dtype=real) * 0.9 + 0.05
    elif value.domain == "above_one":
        x = torch.rand(value.shape, generator=gen, dtype=real) + 1.2
    if dtype.is_complex:
        imag = torch.randn(value.shape, generator=gen, dtype=real) * (
            0.3 if value.domain != "any" else 1.0
        )
        return torch.complex(x, imag)
    return x.to(dtype)


def bind(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> dict:
    """Argument name -> value, with defaults filled in, in schema order."""
    values = {}
    schema_args = op._schema.arguments
    for i, arg in enumerate(schema_args):
        if i < len(args) and not arg.kwarg_only:
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
        else:
            raise AssertionError(f"sample for {op} lacks argument {arg.name}")
    return values


def call(op, values: dict):
    args, kwargs = [], {}
    for arg in op._schema.arguments:
        if arg.kwarg_only:
            kwargs[arg.name] = values[arg.name]
        else:
            args.append(values[arg.name])
    return op(*args, **kwargs)


def is_differentiable_value(value) -> bool:
    if isinstance(value, list):
        return any(is_differentiable_value(v) for v in value)
    return isinstance(value, torch.Tensor) and (
        value.is_floating_point() or value.is_complex()
    )


def random_like(value, gen: torch.Generator):
    if isinstance(value, list):
        return [random_like(v, gen) for v in value]
    if value.is_complex():
        return torch.complex(
            *(
                torch.randn(value.shape, generator=gen, dtype=torch.float64)
                for _ in range(2)
            )
        )
    return torch.randn(value.shape, generator=gen, dtype=value.dtype)


def zeros_like_tree(value):
    if isinstance(value, list):
        return [torch.zeros_like(v) for v in value]
    return torch.zeros_like(value)


def clone_tree(value):
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    return value.clone() if isinstance(value, torch.Tensor) else value


def subsets(names: list[str]):
    for count in range(len(names), -1, -1):
        yield from itertools.combinations(names, count)


def outputs_of(op, out) -> tuple:
    """The op's outputs, one per schema return (a Tensor[] return stays a list)."""
    return (out,) if len(op._schema.returns) == 1 else tuple(out)


def as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def sample_values(op, sample: Sample, dtype: torch.dtype, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    args = make(list(sample.args), dtype, gen)
    kwargs = {k: make(v, dtype, gen) for k, v in sample.kwargs}
    return bind(op, tuple(args), kwargs)
