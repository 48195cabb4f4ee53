"""Running a program and recording every variable after every step.

One interpreter, several engines: native forward AD, dualgen, and plain PyTorch
with `make_dual` replaced by a perturbation along the tangent (finite differences).
The same lines run in each, from literals, so inputs are identical by construction.
After each line every variable defined so far is unpacked and copied (value and
tangent), so the comparison can name the first step where the engines part.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as dual_fwAD

from .program import Program


class VarState(NamedTuple):
    """A variable after a step: its value and tangent (None: no tangent), both
    detached copies with conjugation resolved."""

    value: torch.Tensor
    tangent: torch.Tensor | None


@dataclass
class Trace:
    """What one engine saw. `states[k]` maps each variable to its state after line
    k; `error` is (line index, "Type: message") of the line that raised, after
    which nothing ran; `aliased[k]` says line k updated a tensor in place while
    reading memory of that tensor through another operand."""

    engine: str
    states: list[dict[str, VarState]] = field(default_factory=list)
    error: tuple[int, str] | None = None
    aliased: list[bool] = field(default_factory=list)


@lru_cache(maxsize=8192)
def compiled(line: str):
    return compile(line, "<program>", "exec")


def _copy(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    return t.detach().resolve_conj().resolve_neg().clone()


class Engine:
    """How to run program text: the `fwAD` and `torch` its lines see, the level
    around them, and how to read a variable's value and tangent."""

    name: str

    def namespace(self) -> dict[str, Any]:
        raise NotImplementedError

    def level(self) -> contextlib.AbstractContextManager:
        raise NotImplementedError

    def read(self, t: torch.Tensor) -> VarState:
        raise NotImplementedError


class ForwardADEngine(Engine):
    """Native forward AD or dualgen: the module is the only difference."""

    def __init__(self, name: str, api) -> None:
        self.name = name
        self.api = api

    def namespace(self) -> dict[str, Any]:
        return {"torch": torch, "fwAD": self.api}

    def level(self) -> contextlib.AbstractContextManager:
        return self.api.dual_level()

    def read(self, t: torch.Tensor) -> VarState:
        primal, tangent = self.api.unpack_dual(t)
        return VarState(_copy(primal), _copy(tangent))


NATIVE = ForwardADEngine("native", native_fwAD)
DUALGEN = ForwardADEngine("dualgen", dual_fwAD)


class FiniteDifferenceUnavailable(Exception):
    """The program's value cannot be perturbed along its tangents (a complex tangent
    of a real primal)."""


def laid_out_like(p: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A new tensor with p's strides and conjugate bit holding `values` (an expanded
    dimension takes the values' first slice), so that in-place steps behave on the
    perturbed leaf as on the original."""
    if p.is_conj():
        return laid_out_like(p.conj(), values.conj()).conj()
    out = torch.empty_strided(p.shape, p.stride(), dtype=p.dtype)
    target, source = out, values.to(p.dtype)
    for d in range(p.dim()):
        if p.stride(d) == 0 and p.shape[d] > 1:
            target, source = target.narrow(d, 0, 1), source.narrow(d, 0, 1)
    target.copy_(source)
    return out


class _Unpacked(NamedTuple):
    primal: torch.Tensor
    tangent: torch.Tensor | None


def _same_view(t: torch.Tensor) -> torch.Tensor:
    """A view of t with its sizes, strides and offset, as native's make_dual and
    unpack_dual's primal are. (`view_as` may restride a dimension of size one,
    which changes the memory order of later results, TensorIterator ordering by
    strides, so a read through explicit strides, `as_strided_`, saw other
    elements than under forward AD.)"""
    return t.as_strided(t.shape, t.stride(), t.storage_offset())


class _PerturbedAD:
    """Stands in for `fwAD` in a plain run: `make_dual(p, t)` is p + s t in p's
    layout (p itself, as a view, when s is 0), and nothing has a tangent."""

    def __init__(self, s: float) -> None:
        self.s = s

    def dual_level(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def make_dual(self, primal: torch.Tensor, tangent: torch.Tensor) -> torch.Tensor:
        if self.s == 0:
            return _same_view(primal)
        if tangent.is_complex() and not primal.is_complex():
            raise FiniteDifferenceUnavailable("complex tangent of a real primal")
        # Widened first: s * t in a half-precision tangent's dtype would round.
        wide = torch.complex128 if tangent.is_complex() else torch.float64
        return laid_out_like(primal, primal + self.s * tangent.to(wide))

    def unpack_dual(self, t: torch.Tensor) -> _Unpacked:
        return _Unpacked(_same_view(t), None)


class _Float64Torch:
    """`torch` with float32 read as float64 (and complex64 as complex128), so
    finite differences of a float32 program are taken in double precision."""

    float32 = torch.float64
    complex64 = torch.complex128

    def __getattr__(self, name: str):
        return getattr(torch, name)


class PlainEngine(Engine):
    """No forward AD: leaves perturbed by s along their tangents (see
    _PerturbedAD), optionally in double precision."""

    def __init__(self, s: float = 0.0, double: bool = False) -> None:
        self.name = f"plain(s={s:g}{', float64' if double else ''})"
        self.s = s
        self.double = double

    def namespace(self) -> dict[str, Any]:
        return {
            "torch": _Float64Torch() if self.double else torch,
            "fwAD": _PerturbedAD(self.s),
        }

    def level(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def read(self, t: torch.Tensor) -> VarState:
        return VarState(_copy(t), None)


def _storage(t: Any) -> int | None:
    if not isinstance(t, torch.Tensor) or t.untyped_storage().nbytes() == 0:
        return None
    return t.untyped_storage().data_ptr()


def _aliased(program: Program, k: int, ns: dict[str, Any]) -> bool:
    step = program.steps[k]
    if step.mutates is None:
        return False
    target = _storage(ns.get(step.mutates))
    return target is not None and any(
        _storage(ns.get(name)) == target for name in step.reads
    )


def run(program: Program, engine: Engine) -> Trace:
    """Run `program` under `engine`, recording every variable after every line."""
    trace = Trace(engine.name)
    ns = engine.namespace()
    names: list[str] = []
    with warnings.catch_warnings(), engine.level():
        warnings.simplefilter("ignore")
        for k, line in enumerate(program.lines):
            trace.aliased.append(_aliased(program, k, ns))
            try:
                exec(compiled(line), ns)  # noqa: S102 - the program is our code
                defined = program.steps[k].defines
                if defined is not None and defined not in names:
                    names.append(defined)
                trace.states.append({n: engine.read(ns[n]) for n in names})
            except Exception as exc:  # noqa: BLE001 - any error is a result
                trace.error = (k, f"{type(exc).__name__}: {exc}".split("\n")[0])
                break
    return trace
