"""Second-order tangents: a nested program under two dualgen levels against finite
differences of the plain body, and against nested `torch.func.jvp`.

Every variable after every line has four parts: its value, J u (inner level), J v
(outer level) and u^T H v (the outer tangent of the inner tangent). Finite
differences give all four from plain runs at inputs moved along u and v (the last
by a mixed second difference); torch.func gives them for the whole body at once
(its function returns a copy of every variable after every line). dualgen must
match finite differences; where torch.func differs from both, it must be by a
known defect (torch.func runs native's formulas). Native forward AD itself has a
single level. An input may be dual at one level only (its other tangent "None":
zero for torch.func and finite differences, absent for dualgen).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, NamedTuple

import torch

import dualgen.forward_ad as dual_fwAD

from .compare import (
    AD_TOLERANCE,
    FD_EPS,
    FD_TOLERANCE,
    as_wide,
    close,
    describe,
    tolerance,
)
from .interpret import _copy, _Float64Torch, compiled, laid_out_like
from .judge import Finding, Verdict
from .native_defects import DEFECTS
from .program import NestedProgram

PARTS = ("value", "J u", "J v", "u^T H v")
# The step of the mixed second difference: h^2 must stay far above rounding.
FD_EPS_SECOND = 1e-4
# torch.func runs native's formulas: an in-place op reading its own memory
# through an operand gets native's wrong tangent there too.
INPLACE_ALIASING = DEFECTS[0].name
COMPLEX_INTO_REAL = DEFECTS[1].name
# Ops judged by finite differences alone: torch.func gets some of their second
# derivatives wrong (native_defects.SECOND_ORDER_BLIND), so dualgen agreeing with
# it does not excuse a difference from finite differences (the generator keeps
# their inputs well-conditioned, where the differences are reliable).
FD_ONLY = re.compile(
    r"\b(layer_norm|batch_norm|instance_norm|group_norm|rms_norm|det|logdet"
    r"|slogdet|solve|solve_ex|tensorsolve|inv|inv_ex)\("
)


class Parts(NamedTuple):
    """A variable's four parts, each a detached copy (None: no tangent there)."""

    value: torch.Tensor
    ju: torch.Tensor | None
    jv: torch.Tensor | None
    hvp: torch.Tensor | None


class NestedRun(NamedTuple):
    """`states[k][name]`: the parts after line k; `error`: (line, message)."""

    states: list[dict[str, Parts]]
    error: tuple[int, str] | None


def _inputs(program: NestedProgram, torch_module) -> dict[str, Any]:
    ns = {"torch": torch_module}
    return {
        i.name: tuple(eval(code, ns) for code in (i.primal, i.outer, i.inner))
        for i in program.inputs
    }


def _run_body(program: NestedProgram, ns: dict, read) -> NestedRun:
    """Run the body in `ns`, reading every variable after every line (a line
    that raises, or a variable that cannot be read, ends the run)."""
    states: list[dict[str, Parts]] = []
    names = [i.name for i in program.inputs]
    for k, line in enumerate(program.body):
        try:
            exec(compiled(line), ns)  # noqa: S102 - our own program text
            defined = program.steps[k].defines
            if defined is not None and defined not in names:
                names.append(defined)
            states.append({n: read(ns[n]) for n in names})
        except Exception as exc:  # noqa: BLE001 - any error is a result
            return NestedRun(states, (k, f"{type(exc).__name__}: {exc}".split("\n")[0]))
    return NestedRun(states, None)


def run_dualgen(program: NestedProgram) -> NestedRun:
    """Two dualgen levels: inputs dual at the outer (v) and the inner (u) level
    (or at one of them)."""
    ns: dict[str, Any] = {"torch": torch}

    def read(t: torch.Tensor) -> Parts:
        primal, ju = dual_fwAD.unpack_dual(t, level=1)
        value, jv = dual_fwAD.unpack_dual(primal, level=0)
        hvp = None
        if ju is not None:
            ju, hvp = dual_fwAD.unpack_dual(ju, level=0)
        return Parts(_copy(value), _copy(ju), _copy(jv), _copy(hvp))

    with warnings.catch_warnings(), dual_fwAD.dual_level():
        warnings.simplefilter("ignore")
        for name, (primal, outer, _) in _inputs(program, torch).items():
            dual = primal if outer is None else dual_fwAD.make_dual(primal, outer)
            ns[name] = dual
        with dual_fwAD.dual_level():
            for name, (_, _, inner) in _inputs(program, torch).items():
                if inner is not None:
                    ns[name] = dual_fwAD.make_dual(ns[name], inner, level=1)
            return _run_body(program, ns, read)


def run_torch_func(program: NestedProgram) -> NestedRun | None:
    """Nested torch.func.jvp over the body (None where torch.func cannot run it).
    Its tangents are always present: an absent one reads as zeros."""
    names = [i.name for i in program.inputs]
    inputs = _inputs(program, torch)
    layout: list[list[str]] = []  # the variables each line's outputs hold, in order

    def f(*xs):
        ns: dict[str, Any] = {"torch": torch, **dict(zip(names, xs))}
        known, outs = list(names), []
        layout.clear()
        for k, line in enumerate(program.body):
            exec(compiled(line), ns)  # noqa: S102 - our own program text
            defined = program.steps[k].defines
            if defined is not None and defined not in known:
                known.append(defined)
            layout.append(list(known))
            outs += [ns[n].clone() for n in known]
        return tuple(outs)

    primals = tuple(v[0] for v in inputs.values())
    # An input dual at one level only has a zero tangent at the other here.
    outers = tuple(_or_zeros(v[1], v[0]) for v in inputs.values())
    inners = tuple(_or_zeros(v[2], v[0]) for v in inputs.values())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (values, jus), (jvs, hvps) = torch.func.jvp(
                lambda *xs: torch.func.jvp(f, xs, inners), primals, outers
            )
    except Exception:  # noqa: BLE001 - a body torch.func does not support
        return None
    states, i = [], 0
    for known in layout:
        step = {}
        for n in known:
            step[n] = Parts(*(_copy(t[i]) for t in (values, jus, jvs, hvps)))
            i += 1
        states.append(step)
    return NestedRun(states, None)


def _or_zeros(tangent: torch.Tensor | None, primal: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(primal) if tangent is None else tangent


def _plain(program: NestedProgram, a: float, b: float) -> NestedRun:
    """The body without forward AD, in double precision, at inputs moved by
    a v + b u: values only."""
    torch64 = _Float64Torch()
    ns: dict[str, Any] = {"torch": torch64}
    for name, (primal, outer, inner) in _inputs(program, torch64).items():
        # In the input's layout: views and `contiguous()` of it behave as under AD.
        moved = primal + a * _or_zeros(outer, primal) + b * _or_zeros(inner, primal)
        ns[name] = laid_out_like(primal, moved)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_body(program, ns, lambda t: Parts(_copy(t), None, None, None))


def finite_differences(
    program: NestedProgram, eps: float = FD_EPS, h: float = FD_EPS_SECOND
) -> NestedRun:
    """All four parts from the plain body: central differences along u and v (eps),
    and the mixed second difference along both (h)."""
    at = _plain(program, 0, 0)
    runs = {
        key: _plain(program, a, b)
        for key, (a, b) in {
            "v+": (eps, 0),
            "v-": (-eps, 0),
            "u+": (0, eps),
            "u-": (0, -eps),
            "++": (h, h),
            "+-": (h, -h),
            "-+": (-h, h),
            "--": (-h, -h),
        }.items()
    }
    steps = min(len(r.states) for r in (at, *runs.values()))
    states = []
    for k in range(steps):

        def value(key: str, name: str, k=k) -> torch.Tensor:
            return runs[key].states[k][name].value

        step = {}
        for name, here in at.states[k].items():
            jv = (value("v+", name) - value("v-", name)) / (2 * eps)
            ju = (value("u+", name) - value("u-", name)) / (2 * eps)
            mixed = value("++", name) - value("+-", name) - value("-+", name)
            hvp = (mixed + value("--", name)) / (4 * h * h)
            step[name] = Parts(here.value, ju, jv, hvp)
        states.append(step)
    errors = [r.error for r in (at, *runs.values()) if r.error is not None]
    return NestedRun(states, min(errors) if errors else None)


def _reads_own_memory(program: NestedProgram, k: int) -> bool:
    """Whether line k updates a tensor in place reading its memory through an
    operand (native's and torch.func's in-place aliasing defect)."""
    step = program.steps[k]
    if step.mutates is None:
        return False
    ns: dict[str, Any] = {"torch": torch}
    for name, (primal, _, _) in _inputs(program, torch).items():
        ns[name] = primal
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in program.body[:k]:
            exec(compiled(line), ns)  # noqa: S102 - our own program text
    memory = ns[step.mutates].untyped_storage().data_ptr()
    return any(ns[r].untyped_storage().data_ptr() == memory for r in step.reads)


def _part(parts: Parts, index: int) -> torch.Tensor:
    return as_wide(parts[index], parts.value)


def _differs(a: Parts, b: Parts, table, floor: torch.dtype) -> int | None:
    """The first part in which a and b differ, if any (tolerances at least
    `floor`'s)."""
    dtypes = [floor] + [t.dtype for t in (*a, *b) if t is not None]
    for index in range(len(PARTS)):
        if not close(_part(a, index), _part(b, index), tolerance(table, *dtypes)):
            return index
    return None


def _unchanged(before: Parts | None, now: Parts) -> bool:
    """Whether `now` holds exactly the parts `before` did."""
    return before is not None and all(
        (a is None and b is None)
        or (
            a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)
        )
        for a, b in zip(before, now)
    )


def _agrees_with_torch_func(reference, k: int, name: str, d: Parts) -> bool:
    """Whether every part of dualgen's `name` after line k is torch.func's, to
    AD tolerance."""
    if reference is None or k >= len(reference.states):
        return False
    theirs = reference.states[k].get(name)
    return (
        theirs is not None and _differs(d, theirs, AD_TOLERANCE, torch.float64) is None
    )


def judge_nested(program: NestedProgram) -> Verdict:
    """dualgen's two levels against finite differences of the plain body, every
    part of every variable after every line; and against torch.func, where a
    difference must be torch.func's known defect."""
    dual = run_dualgen(program)
    fd = finite_differences(program)
    reference = run_torch_func(program)
    steps = len(dual.states)
    excused: dict[str, Parts] = {}  # (as they were when excused)
    for k, state in enumerate(dual.states):
        if k >= len(fd.states):
            break
        # (lines after k cannot change what the variables hold after line k)
        excusable = not any(FD_ONLY.search(line) for line in program.body[: k + 1])
        for name, d in state.items():
            expected = fd.states[k][name]
            index = _differs(d, expected, FD_TOLERANCE, program.precision)
            if (
                index is not None
                and excusable
                and _agrees_with_torch_func(reference, k, name, d)
            ):
                # Both AD systems agree to rounding: the finite difference is the
                # one off (a second difference near a pole, tanh's at ±iπ/2, or
                # its truncation error where the true value is 0).
                index = None
                excused[name] = d
            elif index is not None and _unchanged(excused.get(name), d):
                index = None  # excused before, and no line since has changed it
            if index is not None:
                finding = Finding(
                    k,
                    name,
                    PARTS[index],
                    _torch_func_part(reference, k, name, index),
                    describe(d[index]),
                    f"finite differences {describe(expected[index])}",
                    "dualgen",
                )
                return Verdict(program, steps, finding, None, finding)
    if dual.error is not None and (fd.error is None or fd.error[0] > dual.error[0]):
        k, message = dual.error
        finding = Finding(k, None, "error", "runs", message, "runs", "dualgen")
        return Verdict(program, steps, finding, None, finding)
    return _against_torch_func(program, dual, fd, reference, steps)


def _torch_func_part(reference: NestedRun | None, k: int, name: str, index: int):
    if reference is None or k >= len(reference.states):
        return "torch.func: -"
    return f"torch.func {describe(reference.states[k][name][index])}"


def _against_torch_func(program, dual, fd, reference, steps) -> Verdict:
    """The first difference from torch.func (dualgen being right by finite
    differences), explained by a known defect or not."""
    if reference is None:
        return Verdict(program, steps, None, None, None)
    for k, state in enumerate(dual.states[: len(fd.states)]):
        for name, d in state.items():
            r = reference.states[k][name]
            index = _differs(d, r, AD_TOLERANCE, program.precision)
            if (
                index is None
                or _differs(r, fd.states[k][name], FD_TOLERANCE, program.precision)
                is None
            ):
                continue  # agree, or differ by rounding only
            finding = Finding(
                k,
                name,
                PARTS[index],
                f"torch.func {describe(r[index])}",
                describe(d[index]),
                f"finite differences {describe(fd.states[k][name][index])}",
                "torch.func",
            )
            cause = _cause(program, k, index, d, r)
            return Verdict(program, steps, finding, cause, None)
    return Verdict(program, steps, None, None, None)


def _cause(
    program: NestedProgram, k: int, index: int, dual: Parts, func: Parts
) -> str | None:
    """The native defect behind a torch.func difference in part `index` (it runs
    native's formulas), if a known one."""
    if _reads_own_memory(program, k):
        return INPLACE_ALIASING
    if not dual.value.is_complex() and any(
        t is not None and t.is_complex() for t in func[1:]
    ):
        return COMPLEX_INTO_REAL
    for defect in DEFECTS:
        if defect.nested is not None and defect.nested(program, k, index):
            return defect.name
    return None
