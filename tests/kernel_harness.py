"""Calls generated kernels and the same ops under native PyTorch AD, for comparison.

The inputs are the spec's: each kernel runs on the cases `dualgen validate` draws
from its entry's `sample:` lines (the same values, seeded by kernel name), in
float64 and complex128, wherever torch runs the op on them (float32 for an op
torch runs in single precision only). They are drawn on the CPU and moved to the
suite's device (devices.DEVICE), and so are the tangents: the same values on
every device.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from devices import DEVICE, fork_rng

from dualgen.generated.registry import KERNELS
from dualgen.tools.cli import checked_spec
from dualgen.tools.validate import (
    DTYPES,
    SINGLE,
    kernels_by_entry,
    samples_of,
    seed_of,
)
from dualgen.tools.validate.inputs import Case, cases_for

SPEC_PATH = Path(__file__).resolve().parents[1] / "derivatives.yaml"


@dataclass(frozen=True)
class KernelCase:
    op: torch._ops.OpOverload
    info: object  # KernelInfo
    case: Case
    dtype: torch.dtype

    @property
    def id(self) -> str:
        label = self.case.label.replace("sample ", "s").replace(", ", "-")
        return f"{self.info.name}-{label}-{str(self.dtype).removeprefix('torch.')}"

    def values(self) -> dict:
        """A fresh copy of the case's arguments, by name: kernels may write them."""
        return {k: clone_tree(v) for k, v in self.case.values.items()}


@functools.cache
def spec_cases() -> tuple[tuple[KernelCase, ...], dict[str, tuple[str, ...]]]:
    """Every (kernel, case, dtype) torch runs the op on, and by kernel why torch
    refused the others (0-d or empty inputs to a matrix op, complex to a real op,
    a broadcast the in-place variant cannot write)."""
    spec, _ = checked_spec(SPEC_PATH)
    runnable, refused = [], {}
    for entry, op, info in kernels_by_entry(spec, KERNELS):
        samples, seed = samples_of(spec, entry, op), seed_of(info)
        found = _runnable(op, info, samples, seed, DTYPES, refused)
        if not found:  # single precision only (validate checks these in float32)
            found = _runnable(op, info, samples, seed, (SINGLE,), refused)
        runnable += found
    return tuple(runnable), {k: tuple(v) for k, v in refused.items()}


def _runnable(op, info, samples, seed, dtypes, refused: dict) -> list[KernelCase]:
    """The cases in `dtypes` that torch runs; why it refused the others, into
    `refused`."""
    runnable = []
    for dtype in dtypes:
        for case in cases_for(op, samples, dtype, seed, device=DEVICE):
            kernel_case = KernelCase(op, info, case, dtype)
            if case.refusal:
                refused.setdefault(info.name, []).append(
                    f"{kernel_case.id}: {case.refusal}"
                )
                continue
            try:
                with fork_rng():
                    call(op, kernel_case.values())
            except Exception as exc:  # noqa: BLE001 - torch refuses this case
                reason = str(exc).strip().splitlines()[0][:120] if str(exc) else ""
                refused.setdefault(info.name, []).append(
                    f"{kernel_case.id}: {type(exc).__name__}: {reason}"
                )
                continue
            runnable.append(kernel_case)
    return runnable


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
    """Standard normal values of `value`'s shape, drawn on `gen`'s device and
    moved to `value`'s (a CPU generator: the same values on every device)."""
    if isinstance(value, list):
        return [random_like(v, gen) for v in value]
    if value.is_nested:  # (strided: each component's)
        return torch.nested.as_nested_tensor(
            [random_like(c, gen) for c in value.unbind()]
        )
    if value.is_complex():
        drawn = torch.complex(
            *(
                torch.randn(
                    value.shape, generator=gen, dtype=torch.float64, device=gen.device
                )
                for _ in range(2)
            )
        )
    else:
        drawn = torch.randn(
            value.shape, generator=gen, dtype=value.dtype, device=gen.device
        )
    return drawn.to(value.device)


def tangents_for(kernel_case: KernelCase, values: dict, names, seed: int) -> dict:
    """A random tangent for each of `names`; Hermitian for an argument the op sees
    as (A + A^H)/2 (spd, hermitian samples), so it stays in the op's domain."""
    gen = torch.Generator().manual_seed(seed)
    tangents = {}
    for name in names:
        tangent = random_like(values[name], gen)
        if name in kernel_case.case.symmetric and tangent.dim() >= 2:
            tangent = (tangent + tangent.mH) / 2
        tangents[name] = tangent
    return tangents


def zeros_like_tree(value):
    if isinstance(value, list):
        return [torch.zeros_like(v) for v in value]
    return torch.zeros_like(value)


def clone_tree(value):
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    return value.clone() if isinstance(value, torch.Tensor) else value


# Up to this many differentiable inputs, every set of present tangents is tried
# (64 calls at most); beyond it, 2**n calls would take minutes per kernel.
EXHAUSTIVE_INPUTS = 6


def subsets(names: list[str]):
    """Sets of present tangents, all of them first. Every set up to
    EXHAUSTIVE_INPUTS names; beyond, all, none, each name alone, each name
    missing (so each tangent's branch of each formula runs both ways, alone and
    among the others), and 16 more drawn at random, the same ones every run."""
    if len(names) <= EXHAUSTIVE_INPUTS:
        for count in range(len(names), -1, -1):
            yield from itertools.combinations(names, count)
        return
    chosen = [tuple(names), ()]
    chosen += [(n,) for n in names]
    chosen += [tuple(m for m in names if m != n) for n in names]
    draw = random.Random(",".join(names))  # a str seed: the same draws every run
    while len(chosen) < 2 * len(names) + 2 + 16:
        mask = [draw.random() < 0.5 for _ in names]
        subset = tuple(n for n, keep in zip(names, mask) if keep)
        if subset not in chosen:
            chosen.append(subset)
    yield from chosen


def calls_with_each_set_of_tangents(kernel_case: KernelCase):
    """For every set of present tangents of the case (all of them first): the
    primals in schema order, the op's outputs on them, and a function that makes
    fresh tangents for a kernel call (None where absent; the same values each
    time, so two kernels can be given their own copies)."""
    op, info = kernel_case.op, kernel_case.info
    values = kernel_case.values()
    diff = [n for n in info.differentiable_inputs if is_differentiable_value(values[n])]
    full = tangents_for(kernel_case, values, diff, seed=1)
    for present in subsets(diff):
        call_values = dict(values)
        if info.kind == "inplace":
            call_values["self"] = values["self"].clone()
        with fork_rng():
            outputs = outputs_of(op, call(op, call_values))
        primals = [values[a.name] for a in op._schema.arguments]

        def tangents(present=present):
            return [
                clone_tree(full[n]) if n in present else None
                for n in info.differentiable_inputs
            ]

        yield present, primals, outputs, tangents


def outputs_of(op, out) -> tuple:
    """The op's outputs, one per schema return (a Tensor[] return stays a list)."""
    return (out,) if len(op._schema.returns) == 1 else tuple(out)


def as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def assert_matches(got, expected, where, shape=None, **tolerance):
    """`got` has `shape` (expected's unless given) and expected's dtype, and its
    values, NaN matching NaN; a failure names `where`. Nested tensors (strided)
    match component by component."""
    if got.is_nested or expected.is_nested:
        assert got.is_nested and expected.is_nested, f"{where}: nested against dense"
        parts, expected_parts = got.unbind(), expected.unbind()
        assert len(parts) == len(expected_parts), f"{where}: components"
        for i, (g, e) in enumerate(zip(parts, expected_parts)):
            assert_matches(g, e, f"{where}, component {i}", **tolerance)
        return
    shape = expected.shape if shape is None else shape
    assert got.shape == shape, f"{where}: shape {tuple(got.shape)}, not {tuple(shape)}"
    assert (
        got.dtype == expected.dtype
    ), f"{where}: dtype {got.dtype}, expected {expected.dtype}"
    torch.testing.assert_close(
        got, expected, equal_nan=True, msg=lambda m: f"{where}\n{m}", **tolerance
    )
