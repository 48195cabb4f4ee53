"""Every aten op on Taylor series (`apply`, which `JetTensor` dispatches to): the
op's JVP rule, the same the forward mode calls, applied by the op's Taylor rule
(`rules.py`, classified by the generator from the forward formula).

For y = f(x) with x(t) a series of degree d, y's coefficient 0 is f(x_0), and
y'(t) = JVP(x(t), x'(t)); integrating the series of y' gives y's coefficients
1..d. A formula that reads `result` needs y to the order it computes, so those
are integrated one order at a time.
"""

from __future__ import annotations

import itertools

import torch
from torch.utils._pytree import tree_leaves

from ..dispatch.decompositions import has_decomposition
from ..dispatch.op_arguments import bind
from ..missing import no_rule_message
from ..rules.table import generated_kernels, rule_for_tracing
from ..tangents import is_differentiable_dtype, tensors_in
from ..taylor_series import (
    JetTensor,
    coefficient,
    degree_of,
    derivative,
    series,
    truncated,
    use_arithmetic,
    value_of,
)
from .rules import ByFormula, Linear, Multilinear
from .table import taylor_rule


class WritesIntoPlainTensor(NotImplementedError):
    """An in-place op writes a series into a tensor that is not one (`torch.empty`
    filled by `copy_` inside a composite): dualgen.jet runs such code through its
    functional graph instead (dualgen.fx.jet)."""


def apply(func, args, kwargs):
    """func(*args, **kwargs) with some arguments jets: its outputs as jets."""
    degree = min(d for d in map(degree_of, _tensors(args, kwargs)) if d is not None)
    if torch.Tag.inplace_view in func.tags:
        return _inplace_view(func, args, kwargs)
    rule = rule_for_tracing(func)
    if rule is None:
        return _without_rule(func, args, kwargs)
    if rule.kind == "inplace":
        return _inplace(func, rule, args, kwargs, degree)
    out = func(*value_of(args), **value_of(kwargs))
    returns = tuple(out) if len(func._schema.returns) > 1 else (out,)
    primals = bind(func._schema, args, kwargs)
    coefficients = _coefficients(func, rule, primals, returns, degree)
    jets = tuple(
        _as_series(value, per_order) if differentiable else value
        for value, per_order, differentiable in zip(
            returns, coefficients, rule.differentiable_outputs
        )
    )
    return jets if len(func._schema.returns) > 1 else jets[0]


def _coefficients(func, rule, primals, returns, degree) -> list[list]:
    """Per output, its coefficients 1..degree (None: zero)."""
    taylor = taylor_rule(func)
    if isinstance(taylor, Linear):
        per_order = [
            _tangents_of(rule.call(_values(primals), _at(rule, primals, k), returns))
            for k in range(1, degree + 1)
        ]
        return _by_output(per_order, len(returns))
    if isinstance(taylor, Multilinear):
        per_order = [
            _multilinear(rule, taylor, primals, returns, k)
            for k in range(1, degree + 1)
        ]
        return _by_output(per_order, len(returns))
    assert isinstance(taylor, ByFormula)
    if not rule.uses_outputs:
        slope = _tangents_of(_formula_at(rule, primals, returns, degree - 1))
        return [
            [_scaled(_coefficient_of(s, k - 1), 1 / k) for k in range(1, degree + 1)]
            for s in _split(slope, len(returns))
        ]
    known = [[] for _ in returns]
    for k in range(1, degree + 1):
        # (lists of tensors too: a foreach op's formula reads its result)
        outputs = tuple(
            _as_series(value, c[: k - 1]) for value, c in zip(returns, known)
        )
        slope = _tangents_of(_formula_at(rule, primals, outputs, k - 1))
        for c, s in zip(known, _split(slope, len(returns))):
            c.append(_scaled(_coefficient_of(s, k - 1), 1 / k))
    return known


def _formula_at(rule, primals, outputs, degree: int):
    """The JVP formula evaluated on the series known to `degree`."""
    at_degree = [_each(lambda v: truncated(v, degree), p) for p in primals]
    slopes = [
        _tangent(lambda v: derivative(v, degree), primals[i])
        for i in rule.input_indices
    ]
    return rule.call(at_degree, slopes, outputs)


def _multilinear(rule, taylor: Multilinear, primals, returns, k: int):
    """Coefficient k of a multilinear op: Leibniz's rule over its `inputs`, plus
    coefficient k of its linear inputs."""
    names = rule.argument_names or [a.name for a in rule.op._schema.arguments]
    slots = list(rule.differentiable_inputs)
    total = None
    if taylor.linear:
        tangents = [
            _at_input(primals[names.index(n)], k) if n in taylor.linear else None
            for n in slots
        ]
        total = _sum(total, rule.call(_values(primals), tangents, returns))
    positions = [names.index(n) for n in taylor.inputs]
    for orders in _compositions(k, len(positions)):
        terms = [
            _at_input(primals[p], j) if j else value_of(primals[p])
            for p, j in zip(positions, orders)
        ]
        if any(t is None for t in terms):
            continue  # a constant's coefficient beyond 0 is zero
        first = next(i for i, j in enumerate(orders) if j > 0)
        at = list(_values(primals))
        for i, (p, t) in enumerate(zip(positions, terms)):
            if i != first:
                at[p] = t
        tangents = [None] * len(slots)
        tangents[slots.index(taylor.inputs[first])] = terms[first]
        total = _sum(total, rule.call(at, tangents, returns))
    return _tangents_of(total)


def _compositions(k: int, parts: int):
    """The ways to write k as an ordered sum of `parts` whole numbers >= 0."""
    for cuts in itertools.combinations_with_replacement(range(k + 1), parts - 1):
        bounds = (0, *cuts, k)
        yield tuple(b - a for a, b in itertools.pairwise(bounds))


def _inplace(func, rule, args, kwargs, degree):
    """An in-place op: its functional op's series, written into self's."""
    target = bind(func._schema, args, kwargs)[0]
    functional = _functional_of(func)
    if not isinstance(target, JetTensor):
        raise WritesIntoPlainTensor(
            f"Taylor mode: {func._schema.name} writes a series into a plain tensor, "
            "which cannot hold one; write into a tensor computed from the inputs "
            "(x.clone(), torch.zeros_like(x) + 0 * x) or out of place"
        )
    if functional is None and torch.Tag.nondeterministic_seeded in func.tags:
        # A draw (normal_, bernoulli_): its value does not move with t.
        func(*value_of(args), **value_of(kwargs))
        for c in target.coefficients[1:]:
            if c is not None:
                c.zero_()
        return target
    if functional is None:
        raise NotImplementedError(
            f"Taylor mode: {func._schema.name} has no out-of-place op of its name"
        )
    if target.degree != degree:
        raise NotImplementedError(
            f"{func._schema.name}: writes a series of degree {degree} into one of "
            f"degree {target.degree}"
        )
    result = functional(*args, **kwargs)
    updates = [coefficient(result, k) for k in range(degree + 1)]
    for k, (c, new) in enumerate(zip(target.coefficients, updates)):
        if c is None:
            if new is not None:
                raise NotImplementedError(
                    f"Taylor mode: {func._schema.name} writes coefficient {k} into "
                    "a series whose coefficient is absent (zero) and may be "
                    "shared by views; give the series every coefficient"
                )
        elif new is None:
            c.zero_()
        elif new is not c:
            # A coefficient computed from self's own memory is read before the
            # write (torch refuses overlapping copies).
            c.copy_(new.clone() if _shares_memory(c, new) else new)
    return args[0] if args else kwargs["self"]


def _inplace_view(func, args, kwargs):
    """An op that changes self's geometry in place (squeeze_, t_, ...): the same
    change to every coefficient, and to the series' own sizes and strides."""
    target = bind(func._schema, args, kwargs)[0]
    rest_args, rest_kwargs = value_of(args[1:]), value_of(kwargs)
    for c in target.coefficients:
        if c is not None:
            func(c, *rest_args, **rest_kwargs)
    with torch._C._DisableTorchDispatch():
        func(target, *rest_args, **rest_kwargs)
    return target


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except RuntimeError:  # no storage (vmap's batched tensors): copy to be safe
        return True


def _functional_of(func):
    """The out-of-place op computing an in-place op's new value of self: the
    functional entry its kernel derives from, else the overload of its name."""
    if func in _WRITES:
        return _WRITES[func]
    info = generated_kernels().get(func)
    if info is not None and info.derived_from is not None:
        name, _, overload = info.derived_from.partition(".")
        packet = getattr(torch.ops.aten, name, None)
        found = getattr(packet, overload or "default", None) if packet else None
        if found is not None:
            return _by_name(found, func._schema)
    packet = getattr(
        torch.ops.aten, func._schema.name.split("::")[-1].rstrip("_"), None
    )
    found = getattr(packet, func._overloadname, None) if packet is not None else None
    return _by_name(found, func._schema) if found is not None else None


def _by_name(functional, inplace_schema):
    """`functional` called with an in-place op's arguments, matched by name (the
    in-place op may order them otherwise: polygamma_(self, n), polygamma(n, self))."""
    names = [a.name for a in inplace_schema.arguments]

    def call(*args, **kwargs):
        values = dict(zip(names, bind(inplace_schema, args, kwargs)))
        positional, keywords = [], {}
        for a in functional._schema.arguments:
            if a.name not in values:
                continue
            if a.kwarg_only:
                keywords[a.name] = values[a.name]
            else:
                positional.append(values[a.name])
        return functional(*positional, **keywords)

    return call


def _copy_value(self, src, non_blocking=False):
    return src.to(self.dtype).expand(self.shape)


def _zero_value(self):
    return torch.zeros_like(value_of(self))


def _fill_value(self, value):
    if isinstance(value, torch.Tensor):
        return value.to(self.dtype).expand(self.shape)
    return torch.full_like(value_of(self), value)


# In-place ops whose new value of self is not the out-of-place op of their name,
# and the out-of-place forms functionalisation writes them as, which the spec
# has no entries for: the value written, in ops that have rules.
_WRITES = {
    torch.ops.aten.copy_.default: _copy_value,
    torch.ops.aten.zero_.default: _zero_value,
    torch.ops.aten.fill_.Scalar: _fill_value,
    torch.ops.aten.fill_.Tensor: _fill_value,
}
_VALUE_OF_WRITE = {
    torch.ops.aten.copy.default: _copy_value,
    torch.ops.aten.zero.default: _zero_value,
    torch.ops.aten.fill.Scalar: _fill_value,
    torch.ops.aten.fill.Tensor: _fill_value,
}


def _without_rule(func, args, kwargs):
    if func in _VALUE_OF_WRITE:  # functionalisation's out-of-place writes
        return _VALUE_OF_WRITE[func](*args, **kwargs)
    if has_decomposition(func):
        return func.decompose(*args, **kwargs)
    out = func(*value_of(args), **value_of(kwargs))
    differentiable = any(
        is_differentiable_dtype(o)
        for o in tensors_in(out if isinstance(out, (tuple, list)) else (out,))
    )
    if differentiable:  # a series reaches it (apply is called for one)
        raise NotImplementedError(no_rule_message(func))
    return out  # nothing differentiable comes out, or nothing moves


# -- values, coefficients and tangents, tensors and lists alike ------------------


def _tensors(args, kwargs) -> list:
    return [v for v in tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]


def _each(fn, value):
    if isinstance(value, (list, tuple)):
        return type(value)(fn(v) if isinstance(v, torch.Tensor) else v for v in value)
    return fn(value) if isinstance(value, torch.Tensor) else value


def _tangent(fn, value):
    """A tangent from a primal: fn of a tensor, no tangent for anything else."""
    if isinstance(value, (list, tuple)):
        return _present([fn(v) if isinstance(v, torch.Tensor) else None for v in value])
    return fn(value) if isinstance(value, torch.Tensor) else None


def _present(value):
    """A list of tangents with none present is no tangent."""
    if isinstance(value, (list, tuple)) and all(v is None for v in value):
        return None
    return value


def _values(primals) -> list:
    return [value_of(p) for p in primals]


def _at_input(primal, k: int):
    return _tangent(lambda v: coefficient(v, k), primal)


def _at(rule, primals, k: int) -> list:
    return [_at_input(primals[i], k) for i in rule.input_indices]


def _tangents_of(value):
    return value


def _split(value, n: int) -> tuple:
    if n == 1:
        return (value,)
    return tuple(value) if value is not None else (None,) * n


def _by_output(per_order: list, n: int) -> list[list]:
    return [list(column) for column in zip(*(_split(v, n) for v in per_order))]


def _coefficient_of(value, k: int):
    if isinstance(value, (list, tuple)):
        return [_coefficient_of(v, k) for v in value]
    return coefficient(value, k) if value is not None else None


def _scaled(value, factor: float):
    if isinstance(value, (list, tuple)):
        return [_scaled(v, factor) for v in value]
    if value is None or factor == 1:
        return value
    return value * factor


def _sum(total, value):
    if value is None:
        return total
    if total is None:
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_sum(a, b) for a, b in zip(total, value))
    return total + value


def _as_series(value, per_order: list):
    """An output and its coefficients 1..d as a series (lists elementwise)."""
    if isinstance(value, (list, tuple)):
        columns = [
            [c[i] if c is not None else None for c in per_order]
            for i in range(len(value))
        ]
        return type(value)(_as_series(v, c) for v, c in zip(value, columns))
    if not isinstance(value, torch.Tensor) or not per_order:
        return value
    # A series even where every coefficient beyond 0 is zero: an output that is a
    # view of an input must come back wrapped (autograd refuses a plain view).
    for c in per_order:
        if c is not None and c.shape != value.shape:  # never a silently wrong series
            raise RuntimeError(
                f"Taylor mode: a coefficient of shape {tuple(c.shape)} for an "
                f"output of shape {tuple(value.shape)}"
            )
    return series([value, *per_order])


use_arithmetic(apply)
