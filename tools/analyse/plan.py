"""The analysed model: what each generated kernel does, decided, before printing.

Produced by `analyse`, read by `emit_python` and `emit_cpp`. Trees stay trees here;
printing to a target language is each emitter's job.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable
from dataclasses import dataclass

from ..spec.errors import Location
from ..spec.model import OperatorSchema, OpKind


class Action(enum.Enum):
    RETURN = "return"  # the tangent is the expression
    RETURN_CONFORMED = "return_conformed"  # ... given the output's shape and dtype
    NEW_SELF_VALUE = "new_self_value"  # in-place: self's new tangent; the runtime
    # writes it into self_t (kernels do not overwrite what their formula reads)
    SELF_UNCHANGED = "self_unchanged"  # in-place: the tangent of self is kept as is
    MUTATES_SELF = "mutates_self"  # in-place: the expression updates self_t itself
    ZERO_SELF = "zero_self"  # in-place: self's tangent becomes zero
    NONE = "none"  # no tangent


@dataclass(frozen=True)
class Branch:
    present: tuple[str, ...]  # tangent parameters that are not None in this branch
    absent: tuple[str, ...]  # referenced tangent parameters that are None
    lists_to_fill: tuple[tuple[str, str], ...]  # (tangent list, primal list) to densify
    expr: ast.expr | None
    action: Action
    # A formula with too many tangents to enumerate branches only on its optional
    # tensors' tangents (whose primal may be None); the others, (tangent, primal)
    # here, are zeros where absent.
    zeros_to_fill: tuple[tuple[str, str], ...] = ()

    @property
    def dense(self) -> bool:
        return bool(self.zeros_to_fill)

    def tested(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """What the branch's condition tests, for every printer: the tangents
        present, those absent, and those one of which is present. A branch of
        the enumeration tests only what it has (earlier branches took the
        rest); a dense one does not test the tangents it fills with zeros."""
        if not self.dense:
            return self.present, (), ()
        required = {t for t, _ in self.zeros_to_fill} | {
            t for t, _ in self.lists_to_fill
        }
        chosen = tuple(t for t in self.present if t not in required)
        return chosen, self.absent, () if chosen else tuple(sorted(required))


@dataclass(frozen=True)
class ConditionSpelling:
    """How a target language writes a branch's test of its tangents: `there` and
    `missing` are templates for one tangent's name, spelt by `name`."""

    there: str
    missing: str
    either: str  # `or`
    both: str  # `and`
    name: Callable[[str], str] = str

    def condition(
        self, present: tuple[str, ...], absent: tuple[str, ...], any_of: tuple[str, ...]
    ) -> str:
        """`present` are there, `absent` are not, and one of `any_of` is."""
        parts = [self._is_there(t) for t in present]
        parts += [self.missing.format(self.name(t)) for t in absent]
        if len(any_of) == 1:
            parts.append(self._is_there(any_of[0]))
        elif any_of:
            parts.append("(" + self.either.join(map(self._is_there, any_of)) + ")")
        return self.both.join(parts)

    def _is_there(self, tangent: str) -> str:
        return self.there.format(self.name(tangent))


@dataclass(frozen=True)
class OutputTangent:
    output: str
    formula: str  # as written in the spec, or how it was derived
    origin: str
    branches: tuple[Branch, ...]
    location: Location | None = None  # the forward formula's line in the spec


@dataclass(frozen=True)
class SharedCall:
    """Outputs whose formulas index one call (`svd_tangents(...)[k]`): the
    kernel runs the call once, under the outputs' common conditions."""

    outputs: tuple[str, ...]  # in schema order
    indices: tuple[int, ...]  # the element of the call's result each takes
    calls: tuple[ast.expr, ...]  # the call, one per printed branch


@dataclass(frozen=True)
class JvpPlan:
    kernel: str
    params: tuple[str, ...]
    outputs: tuple[OutputTangent | None, ...]  # one per schema output
    shared: tuple[SharedCall, ...] = ()  # see tools/analyse/shared.py


@dataclass(frozen=True)
class BackwardStep:
    inputs: tuple[str, ...]
    formula: str
    expr: ast.expr


@dataclass(frozen=True)
class VjpPlan:
    kernel: str
    params: tuple[str, ...]
    grad_aliases: tuple[tuple[str, int], ...]  # `grad_values = grads[0]`
    steps: tuple[BackwardStep, ...]
    returns: tuple[str, ...]  # differentiable inputs, in schema order


@dataclass(frozen=True)
class TaylorPlan:
    """How Taylor mode propagates the op's series (runtime/taylor/rules.py)."""

    rule: str  # "linear", "multilinear", "by_formula"
    inputs: tuple[str, ...] = ()  # multilinear: the inputs of the form M
    linear: tuple[str, ...] = ()  # multilinear: inputs that enter linearly


@dataclass(frozen=True)
class OpPlan:
    schema: OperatorSchema
    kind: OpKind
    location: Location
    entry: str  # the spec entry the kernel is generated from ("abs" for abs_ too)
    derived_from: str | None  # in-place entries: the functional entry they come from
    differentiable_inputs: tuple[str, ...]
    differentiable_outputs: tuple[str, ...]
    needs_original_self: bool  # the in-place JVP reads self_p, self before the update
    jvp_uses_outputs: bool  # a forward formula reads an output (`result`)
    # The forward formula is auto_element_wise: native evaluates it as
    # conj(VJP(conj(x_t))), for a complex output a conjugate view, which it copies
    # into the output's dtype (runtime/dtypes.py).
    element_wise_jvp: bool
    jvp: JvpPlan
    vjp: VjpPlan
    # `torch_releases` of the entry: the kernel is registered only where the
    # installed torch has the overload; None: on every supported release.
    torch_releases: str | None = None
    taylor: TaylorPlan = TaylorPlan("by_formula")
