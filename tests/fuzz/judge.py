"""Judging a program: native forward AD and dualgen side by side, the plain run and
finite differences deciding who is right where they part.

Two checks. (1) Native against dualgen, every variable after every line: value,
tangent value, presence and dtype, and errors; the first difference is the
disagreement, and later ones follow from it. Where the plain run or finite
differences can tell, the side that differs from them is the culprit; a
disagreement with native as culprit, or none known, must be explained by a
registered native defect (`native_defects.py`). (2) dualgen against the plain run
and finite differences, every variable after every line, whatever native did: the
check that still holds after native went wrong. A difference there is dualgen
wrong, unless native is wrong there too and a registered defect dualgen shares on
purpose explains it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .compare import AD_TOLERANCE, FD_TOLERANCE, as_wide, close, describe, tolerance
from .finite_diff import Arbiter, arbiter
from .interpret import DUALGEN, NATIVE, Trace, VarState, run
from .program import Program

AGREE = "agree"
DUALGEN_WRONG = "dualgen wrong"
UNRECOGNISED = "unrecognised"


class DualgenWrong(AssertionError):
    """dualgen differs from finite differences, or raises where native runs."""


class UnrecognisedDisagreement(AssertionError):
    """A difference no registered native defect explains."""


def check(verdict: Verdict) -> None:
    """Raise for a verdict that counts against dualgen or needs looking at, with the
    program as a reproducer (distinct types, so hypothesis shrinks each apart)."""
    if verdict.outcome == DUALGEN_WRONG:
        raise DualgenWrong(verdict.report())
    if verdict.outcome == UNRECOGNISED:
        raise UnrecognisedDisagreement(verdict.report())


@dataclass(frozen=True)
class Finding:
    """A difference after line `step` in `aspect` ("error", "value", "tangent
    value", "tangent presence", "tangent dtype") of `variable`; what each side
    gave, the reference where there is one, and who is wrong by it ("native",
    "dualgen", "both", "torch.func" for nested programs, or "unknown" where no
    reference decides)."""

    step: int
    variable: str | None
    aspect: str
    native: str
    dualgen: str
    reference: str = "-"
    culprit: str = "unknown"

    def __str__(self) -> str:
        where = f"after line {self.step + 1}" + (
            f", {self.variable}" if self.variable else ""
        )
        return (
            f"{self.aspect} differs {where} (culprit: {self.culprit})\n"
            f"  native:    {self.native}\n"
            f"  dualgen:   {self.dualgen}\n"
            f"  reference: {self.reference}"
        )


@dataclass(frozen=True)
class Verdict:
    """The outcome of one program. `finding`: the first difference between native
    and dualgen, or between both (agreeing) and finite differences; `cause`: the
    registered native defect that explains it; `dualgen_wrong`: a difference that
    shows dualgen wrong (against finite differences or the plain run, or raising
    where native runs), with no registered cause that dualgen shares."""

    program: Program
    steps_compared: int
    finding: Finding | None
    cause: str | None
    dualgen_wrong: Finding | None

    @property
    def outcome(self) -> str:
        """AGREE, a native defect's name, DUALGEN_WRONG or UNRECOGNISED."""
        if self.dualgen_wrong is not None:
            return DUALGEN_WRONG
        if self.finding is None:
            return AGREE
        return self.cause or UNRECOGNISED

    @property
    def ok(self) -> bool:
        return self.outcome not in (DUALGEN_WRONG, UNRECOGNISED)

    def report(self) -> str:
        finding = self.dualgen_wrong or self.finding
        return "\n".join(
            [
                f"outcome: {self.outcome}",
                str(finding),
                "program (runs as printed; swap the import for native):",
                self.program.script(show=_shown(self.program, finding)),
            ]
        )


def _shown(program: Program, finding: Finding | None) -> tuple[str, ...]:
    if finding is None or finding.variable is None:
        return ()
    return (finding.variable,)


def _tangent_value(state: VarState):
    return as_wide(state.tangent, state.value)


def _matches_fd(state: VarState, fd, tol: float) -> bool:
    return close(_tangent_value(state), fd, tol)


def _culprit(native_ok: bool, dualgen_ok: bool) -> str:
    if native_ok and not dualgen_ok:
        return "dualgen"
    if dualgen_ok and not native_ok:
        return "native"
    return "unknown"


def compare_variable(
    k: int,
    name: str,
    native: VarState,
    dual: VarState,
    judge: Arbiter,
    tangent_dtype: bool = True,
    floor: torch.dtype | None = None,
) -> Finding | None:
    """The first aspect in which `name` differs after line k, if any (its tangent's
    dtype only with `tangent_dtype`); tolerances at least `floor`'s."""
    reference = (
        judge.reference.states[k].get(name) if k < len(judge.reference.states) else None
    )

    def finding(aspect, n, d, ref="-", culprit="unknown") -> Finding:
        return Finding(k, name, aspect, n, d, ref, culprit)

    if native.value.dtype != dual.value.dtype or native.value.shape != dual.value.shape:
        ref = reference.value if reference is not None else None
        return finding(
            "value",
            describe(native.value),
            describe(dual.value),
            describe(ref),
        )
    ad_tol = tolerance(AD_TOLERANCE, native.value.dtype, floor)
    if not close(native.value, dual.value, ad_tol):
        if reference is None:
            return finding("value", describe(native.value), describe(dual.value))
        return finding(
            "value",
            describe(native.value),
            describe(dual.value),
            describe(reference.value),
            _culprit(
                close(native.value, reference.value, ad_tol),
                close(dual.value, reference.value, ad_tol),
            ),
        )
    dtypes = [native.value.dtype, floor]
    dtypes += [t.dtype for t in (native.tangent, dual.tangent) if t is not None]
    fd = judge.tangent(k, name)
    if not close(
        _tangent_value(native), _tangent_value(dual), tolerance(AD_TOLERANCE, *dtypes)
    ):
        if fd is None:
            return finding(
                "tangent value", describe(native.tangent), describe(dual.tangent)
            )
        fd_tol = tolerance(FD_TOLERANCE, *dtypes)
        native_ok = _matches_fd(native, fd, fd_tol)
        dual_ok = _matches_fd(dual, fd, fd_tol)
        if not (native_ok and dual_ok):  # else: rounding, both as right as can be told
            return finding(
                "tangent value",
                describe(native.tangent),
                describe(dual.tangent),
                f"finite differences {describe(fd)}",
                _culprit(native_ok, dual_ok),
            )
    if (native.tangent is None) != (dual.tangent is None):
        return finding(
            "tangent presence", describe(native.tangent), describe(dual.tangent)
        )
    # (Not for an empty tensor: native's dtype there is whichever its zero-filled
    # temporaries had, as every layout matches one without elements.)
    if (
        tangent_dtype
        and native.tangent is not None
        and native.value.numel() > 0
        and native.tangent.dtype != dual.tangent.dtype
    ):
        return finding(
            "tangent dtype", describe(native.tangent), describe(dual.tangent)
        )
    return None


def _error_finding(k: int, native: Trace, dual: Trace, judge: Arbiter) -> Finding:
    n = native.error[1] if native.error and native.error[0] == k else "runs"
    d = dual.error[1] if dual.error and dual.error[0] == k else "runs"
    plain_raised = judge.reference.error is not None and judge.reference.error[0] == k
    ref = judge.reference.error[1] if plain_raised else "runs"
    # Raising where the plain program runs is wrong, unless forward AD itself
    # cannot go on (both engines raise then, and there is no finding).
    culprit = _culprit(
        native_ok=(n == "runs") != plain_raised,
        dualgen_ok=(d == "runs") != plain_raised,
    )
    return Finding(k, None, "error", n, d, ref, culprit)


def first_disagreement(
    program: Program,
    native: Trace,
    dual: Trace,
    judge: Arbiter,
    all_dtypes: bool = False,
) -> tuple[Finding | None, int]:
    """The first difference between the engines, and how many lines both ran.

    Tangent dtypes are compared exactly, also past a make_dual whose tangent
    has another precision than its primal (float32 or bfloat16 of float64,
    complex64 of complex128): native keeps such a tangent's dtype, and each op's
    output tangent dtype is native's behaviour to match (`relu` gives float64,
    `sum` keeps float32). Not past a real tangent of a complex primal: there
    native's dtypes follow its kernels' layouts (a formula's result laid out like
    the output is kept in its own dtype, any other is copied into the output's:
    `x.conj_physical()` with x a complex offset view with a real tangent gives a
    complex one), and only the values and the make_dual step's dtype are
    compared (`all_dtypes`: every dtype all the same, for regressions pinning
    native's where it is systematic)."""
    steps = min(len(native.states), len(dual.states))
    mixed = False
    for k in range(steps):
        made = program.made_dual(k)
        for name, n in native.states[k].items():
            d = dual.states[k].get(name)
            if d is not None:
                dtype = all_dtypes or not mixed or name == made
                found = compare_variable(k, name, n, d, judge, dtype, program.precision)
                if found is not None:
                    return found, k + 1
        if made is not None:
            state = native.states[k][made]
            mixed = mixed or state.tangent.is_complex() != state.value.is_complex()
    if (native.error is None) != (dual.error is None) or (
        native.error is not None and native.error[0] != dual.error[0]
    ):
        return _error_finding(steps, native, dual, judge), steps
    return None, steps


def dualgen_against_reference(
    native: Trace, dual: Trace, judge: Arbiter, floor: torch.dtype | None = None
) -> Finding | None:
    """The first variable whose dualgen value differs from the plain run's, or whose
    tangent differs from finite differences. The culprit is "dualgen", or "both"
    where native is wrong there too."""
    for k, state in enumerate(dual.states):
        if k >= len(judge.reference.states):
            return None
        reference = judge.reference.states[k]
        natives = native.states[k] if k < len(native.states) else {}
        for name, d in state.items():
            ref, n = reference.get(name), natives.get(name)
            if ref is None:
                continue
            dtypes = [d.value.dtype, floor] + (
                [d.tangent.dtype] if d.tangent is not None else []
            )
            tol = tolerance(AD_TOLERANCE, *dtypes)
            if not close(d.value, ref.value, tol):
                shared = n is not None and not close(n.value, ref.value, tol)
                return Finding(
                    k,
                    name,
                    "value",
                    describe(n.value) if n is not None else "-",
                    describe(d.value),
                    describe(ref.value),
                    "both" if shared else "dualgen",
                )
            fd = judge.tangent(k, name)
            fd_tol = tolerance(FD_TOLERANCE, *dtypes)
            if fd is not None and not _matches_fd(d, fd, fd_tol):
                shared = n is not None and not _matches_fd(n, fd, fd_tol)
                return Finding(
                    k,
                    name,
                    "tangent value",
                    describe(n.tangent) if n is not None else "-",
                    describe(d.tangent),
                    f"finite differences {describe(fd)}",
                    "both" if shared else "dualgen",
                )
    return None


def judge(program: Program, all_dtypes: bool = False) -> Verdict:
    """Run `program` under native, dualgen and plainly; say who is right
    (`all_dtypes`: see `first_disagreement`)."""
    from .native_defects import explain  # the registry judges with this module

    native = run(program, NATIVE)
    dual = run(program, DUALGEN)
    decider = arbiter(program)
    disagreement, steps = first_disagreement(program, native, dual, decider, all_dtypes)
    wrong = dualgen_against_reference(native, dual, decider, program.precision)
    if disagreement is not None and disagreement.culprit == "dualgen":
        wrong = disagreement
    if wrong is not None and wrong.culprit == "dualgen":
        return Verdict(program, steps, disagreement, None, wrong)
    # What is left: native wrong or undecided, or both wrong alike.
    findings = [f for f in (disagreement, wrong) if f is not None]
    if not findings:
        return Verdict(program, steps, None, None, None)
    first = min(findings, key=lambda f: f.step)
    defect = explain(program, first, native, dual)
    return Verdict(program, steps, first, defect and defect.name, None)
