"""Stage 3, analyse: model entries -> kernel plans.

Resolves every forward formula (as written, auto_element_wise, auto_linear, view),
derives in-place variants from functional entries, and specialises each forward
formula for every combination of present tangents (zeros.py). Never mutates the model.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, replace

from ..spec.errors import Location
from ..spec.model import (
    Auto,
    Entry,
    ForwardFormula,
    OperatorSchema,
    OpKind,
    Spec,
    TypeKind,
)
from ..spec.schema import TorchOperators
from .derive import cotangent_name, element_wise_jvp, grads_to_name, is_name, op_call
from .plan import Action, BackwardStep, Branch, JvpPlan, OpPlan, OutputTangent, VjpPlan
from .shared import shared_calls
from .taylor import classify
from .zeros import specialise

# Beyond this many tangents referenced by one formula, branches are enumerated only
# over its optional tensors' tangents; the other absent ones become zeros.
MAX_SPECIALISED_TANGENTS = 4


@dataclass(frozen=True)
class _Resolved:
    output: str
    expr: ast.expr
    text: str
    origin: str
    location: Location | None = None  # the forward formula's line


def analyse(spec: Spec, ops: TorchOperators) -> tuple[OpPlan, ...]:
    by_name = {e.schema.full_name: e for e in spec.entries}
    plans: list[OpPlan] = []
    for entry in spec.entries:
        if entry.inherits_from is not None:
            plans.append(_plan(entry.schema, by_name[entry.inherits_from], entry))
            continue
        plans.append(_plan(entry.schema, entry, entry))
        if entry.torch_releases is not None:
            continue  # its twins differ by release: an in-place entry says so itself
        inplace = _inplace_counterpart(entry.schema, ops)
        if inplace is not None and inplace.full_name not in by_name:
            plans.append(_plan(inplace, entry, entry))
    return tuple(plans)


def _inplace_counterpart(
    schema: OperatorSchema, ops: TorchOperators
) -> OperatorSchema | None:
    """`sin_` for `sin`: the in-place overload whose arguments match, if torch has
    one. Its overload name usually matches; where it does not (pow.Tensor_Scalar's
    is pow_.Scalar), the arguments decide."""
    if schema.kind is not OpKind.FUNCTIONAL:
        return None
    strip = lambda args: [
        (a.name, a.type.base, a.type.suffix, a.default, a.kwarg_only) for a in args
    ]
    same_name = schema.qualify(
        f"{schema.name}_.{schema.overload}" if schema.overload else f"{schema.name}_"
    )
    candidates = sorted(
        ops.overloads(schema.qualify(f"{schema.name}_")),
        key=lambda s: s.full_name != same_name,
    )
    for inplace in candidates:
        # An in-place overload that returns nothing (`_foreach_add_`, `-> ()`)
        # updates a list `self`, which the runtime cannot: none is derived.
        if (
            inplace.kind is OpKind.INPLACE
            and inplace.returns
            and strip(inplace.arguments) == strip(schema.arguments)
        ):
            return inplace
    return None


def _plan(schema: OperatorSchema, source: Entry, entry: Entry) -> OpPlan:
    """Plan the kernels of `schema`, with formulas from `source` (itself, or the
    functional entry an in-place one derives from)."""
    inplace = schema.kind is OpKind.INPLACE
    derived_from = source.schema.full_name if source.schema != schema else None
    diff_inputs = tuple(a.name for a in source.differentiable_inputs)
    resolved = [_resolve(f, schema, source) for f in source.forward]
    jvp = _jvp_plan(schema, source, resolved, inplace)
    needs_original_self = inplace and any(
        isinstance(n, ast.Name) and n.id == "self_p"
        for r in resolved
        for n in ast.walk(r.expr)
    )
    return OpPlan(
        schema=schema,
        kind=schema.kind,
        location=entry.location,
        entry=entry.schema.full_name,
        derived_from=derived_from,
        differentiable_inputs=diff_inputs,
        differentiable_outputs=source.differentiable_outputs,
        needs_original_self=needs_original_self,
        jvp_uses_outputs=any(
            isinstance(n, ast.Name) and n.id in schema.output_names()
            for r in resolved
            for n in ast.walk(r.expr)
        ),
        element_wise_jvp=any(r.origin == "auto_element_wise" for r in resolved),
        jvp=jvp,
        vjp=_vjp_plan(schema, source),
        torch_releases=entry.torch_releases.text if entry.torch_releases else None,
        taylor=classify(
            [(r.output, r.expr) for r in resolved],
            diff_inputs,
            schema.output_names(),
            len(schema.returns) == 1,
        ),
    )


def _resolve(
    forward: ForwardFormula, schema: OperatorSchema, source: Entry
) -> _Resolved:
    if forward.formula is not None:
        return _Resolved(
            forward.output,
            forward.formula.tree,
            forward.formula.source,
            "spec",
            forward.location,
        )
    if forward.auto is Auto.LINEAR:
        tangents = {a.name for a in source.differentiable_inputs}
        origin = "view" if schema.kind is OpKind.VIEW else "auto_linear"
        called = schema
        if schema.kind is OpKind.INPLACE and "self" not in tangents:
            # The in-place op applied to the tangents would update self_p, the
            # primal: without self's tangent to update, self's new tangent is the
            # functional op's value (that of the entry the kernel derives from;
            # an in-place entry's own: the overload of the same name without `_`).
            called, origin = source.schema, "auto_linear_functional"
            if called.kind is OpKind.INPLACE:
                called = replace(called, name=called.name.removesuffix("_"))
        return _Resolved(
            forward.output,
            op_call(called, tangents),
            "auto_linear",
            origin,
            forward.location,
        )
    assert forward.auto is Auto.ELEMENT_WISE
    (step,) = source.backward
    (input_name,) = step.inputs
    expr = element_wise_jvp(step.formula.tree, source.schema, input_name)
    text = f"auto_element_wise, from {input_name}: {step.formula.source}"
    return _Resolved(forward.output, expr, text, "auto_element_wise", forward.location)


def _jvp_params(
    schema: OperatorSchema, diff_inputs: tuple[str, ...]
) -> tuple[str, ...]:
    primals = [
        f"{a.name}_p" if a.kind.is_tensor_like else a.py_name for a in schema.arguments
    ]
    tangents = [f"{n}_t" for n in diff_inputs]
    return tuple(primals + tangents + list(schema.output_names()))


def _jvp_plan(
    schema: OperatorSchema, source: Entry, resolved: list[_Resolved], inplace: bool
) -> JvpPlan:
    diff_inputs = tuple(a.name for a in source.differentiable_inputs)
    lists = {
        f"{a.name}_t": f"{a.name}_p"
        for a in source.differentiable_inputs
        if a.kind.is_list
    }
    optional = frozenset(
        f"{a.name}_t"
        for a in source.differentiable_inputs
        if a.kind is TypeKind.OPTIONAL_TENSOR
    )
    tensor_inputs = sum(1 for a in schema.arguments if a.kind.is_tensor_like)
    # A list output (`_foreach_div.List`) is never conformed: `conform` is for one
    # tensor, and each term is shaped per element of the list already.
    listed = any("[" in r.type.suffix for r in schema.returns)
    by_output = {r.output: r for r in resolved}
    outputs = []
    for name in schema.output_names():
        r = by_output.get(name)
        if r is None:
            outputs.append(None)
            continue
        mutating = inplace and r.origin == "auto_linear"
        branches = _branches(
            r.expr,
            diff_inputs,
            lists,
            optional,
            inplace,
            mutating,
            tensor_inputs > 1 and not listed,
        )
        outputs.append(OutputTangent(name, r.text, r.origin, branches, r.location))
    return JvpPlan(
        schema.kernel_name,
        _jvp_params(schema, diff_inputs),
        tuple(outputs),
        shared_calls(tuple(outputs)),
    )


def _referenced(expr: ast.expr, diff_inputs: tuple[str, ...]) -> list[str]:
    used = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    return [f"{d}_t" for d in diff_inputs if f"{d}_t" in used]


def _branches(
    expr: ast.expr,
    diff_inputs: tuple[str, ...],
    lists: dict[str, str],
    optional: frozenset[str],
    inplace: bool,
    mutating: bool,
    may_broadcast: bool,
) -> tuple[Branch, ...]:
    referenced = _referenced(expr, diff_inputs)
    # An in-place kernel branches on self's tangent, which it updates, even where
    # the formula does not read it; but only where self is differentiable: a
    # non-differentiable self has no tangent parameter (the runtime passes the
    # tangents of the differentiable inputs), and self's new tangent is the
    # formula's value from the other tangents.
    if inplace and "self" in diff_inputs and "self_t" not in referenced:
        referenced.insert(0, "self_t")
    if len(referenced) > MAX_SPECIALISED_TANGENTS:
        return _dense_branches(
            expr, referenced, lists, optional, inplace, mutating, may_broadcast
        )
    branches = []
    for count in range(len(referenced), 0, -1):
        for present in itertools.combinations(referenced, count):
            absent = tuple(t for t in referenced if t not in present)
            branches.append(
                _branch(
                    expr,
                    present,
                    absent,
                    lists,
                    optional,
                    inplace,
                    mutating,
                    may_broadcast,
                )
            )
    return tuple(branches)


def _dense_branches(
    expr, referenced, lists, optional, inplace, mutating, may_broadcast
) -> tuple[Branch, ...]:
    """Branches on the optional tensors' tangents only (their primal may be None,
    so no zeros can stand in for them); zeros for the other absent tangents."""
    maybe_none = [t for t in referenced if t in optional]
    required = [t for t in referenced if t not in optional]
    zeros = tuple((t, t[: -len("_t")] + "_p") for t in required if t not in lists)
    filled = tuple((t, lists[t]) for t in required if t in lists)
    branches = []
    for count in range(len(maybe_none), -1, -1):
        for chosen in itertools.combinations(maybe_none, count):
            absent = tuple(t for t in maybe_none if t not in chosen)
            present = tuple(t for t in referenced if t not in absent)
            branch = _branch(
                expr, present, absent, lists, optional, inplace, mutating, may_broadcast
            )
            branches.append(replace(branch, lists_to_fill=filled, zeros_to_fill=zeros))
    return tuple(branches)


def _branch(
    expr, present, absent, lists, optional, inplace, mutating, may_broadcast
) -> Branch:
    result = specialise(expr, frozenset(present), frozenset(absent), optional, lists)
    fill = tuple((t, lists[t]) for t in present if t in lists)
    if result.expr is None:
        action = Action.ZERO_SELF if inplace and "self_t" in present else Action.NONE
    elif inplace and "self_t" in present:
        if is_name(result.expr, "self_t"):
            action = Action.SELF_UNCHANGED
        elif mutating:
            action = Action.MUTATES_SELF
        else:
            action = Action.NEW_SELF_VALUE
    elif inplace:
        action = Action.RETURN if mutating else Action.RETURN_CONFORMED
    else:
        action = (
            Action.RETURN_CONFORMED
            if result.dropped and may_broadcast
            else Action.RETURN
        )
    return Branch(tuple(present), tuple(absent), fill, result.expr, action)


def _vjp_plan(schema: OperatorSchema, source: Entry) -> VjpPlan:
    outputs = schema.output_names()
    single = len(outputs) == 1
    used = {
        n.id
        for b in source.backward
        for n in ast.walk(b.formula.tree)
        if isinstance(n, ast.Name)
    }
    arguments = tuple(a.py_name for a in schema.arguments)
    aliases: list[tuple[str, int]] = []
    if not single:
        for i, o in enumerate(outputs):
            if f"grad_{o}" in used and f"grad_{o}" not in arguments:
                aliases.append((f"grad_{o}", i))
        if "grad" in used and "grad" not in arguments:
            aliases.append(("grad", source.output_differentiability.index(True)))
    # One output: its gradient is the parameter `grad`, or, where an argument
    # is named `grad`, `grad_<output>`, which the formulas' `grads[0]` becomes.
    cotangent = cotangent_name(schema)
    params = (cotangent,) + arguments + outputs
    steps = tuple(
        BackwardStep(
            b.inputs,
            b.formula.source,
            (
                grads_to_name(b.formula.tree, cotangent)
                if cotangent not in ("grad", "grads")
                else b.formula.tree
            ),
        )
        for b in source.backward
    )
    returns = tuple(a.name for a in source.differentiable_inputs)
    return VjpPlan(schema.kernel_name, params, tuple(aliases), steps, returns)
