"""A custom Function applied to Taylor series (dualgen.jet): its own `jvp` (or a
rule `register_jvp(cls)` gave it), evaluated in series arithmetic, never the aten
ops inside `forward` (a straight-through `round` keeps its tangent, as at one
level).

For series x(t) of degree d: the outputs' coefficient 0 is `apply` on the
values; the outputs to degree d-1 come from `apply` on the inputs truncated to
d-1 (the same rule, one order lower, down to a plain apply); what `jvp` reads
on ctx is what `setup_context` saves from those inputs and outputs (with
`forward(ctx, ...)`, what `forward` saves run on them); jvp of the inputs'
derivative series is the outputs' derivative series, integrated order by order.
"""

from __future__ import annotations

import inspect

import torch
from torch.autograd.function import FunctionCtx

from .. import taylor_series as taylor
from .call import has_setup_context
from .differentiate import as_tuple, has_jvp
from .user_rules import RULES


def takes_series(args, kwargs) -> bool:
    return any(isinstance(a, taylor.JetTensor) for a in (*args, *kwargs.values()))


class _SeriesCtx(FunctionCtx):
    """What `forward`/`setup_context` save, kept as the series they are."""

    materialize = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def set_materialize_grads(self, value: bool):
        self.materialize = value

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass


def apply_on_series(cls, apply, args: tuple, kwargs: dict):
    """`cls.apply(*args, **kwargs)` with some arguments series; `apply` is the
    plain apply (no series in its arguments)."""
    rule = RULES.get(cls) or (cls.jvp if has_jvp(cls) else None)
    if rule is None:
        raise NotImplementedError(
            f"Taylor mode applies a custom Function's jvp: {cls.__name__} has none "
            f"(define {cls.__name__}.jvp or register one with "
            f"dualgen.register_jvp({cls.__name__}))"
        )
    degree = min(
        d for d in map(taylor.degree_of, (*args, *kwargs.values())) if d is not None
    )
    values = as_tuple(apply(*taylor.value_of(args), **taylor.value_of(dict(kwargs))))
    lower_args = tuple(taylor.truncated(a, degree - 1) for a in args)
    lower_kwargs = {k: taylor.truncated(v, degree - 1) for k, v in kwargs.items()}
    lower = as_tuple(cls.apply(*lower_args, **lower_kwargs))  # again, one order down
    ctx = _ctx(cls, lower_args, lower_kwargs, lower)
    inputs = _bound(cls, args, kwargs)
    slopes = [
        _slope(x, degree - 1, ctx.materialize) if isinstance(x, torch.Tensor) else None
        for x in inputs
    ]
    results = as_tuple(rule(ctx, *slopes))
    outputs = tuple(
        _integrated(value, result, degree) for value, result in zip(values, results)
    )
    return outputs if len(outputs) > 1 else outputs[0]


def _ctx(cls, args, kwargs, outputs):
    ctx = _SeriesCtx()
    if has_setup_context(cls):
        inputs = _bound(cls, args, kwargs)
        cls.setup_context(ctx, inputs, outputs if len(outputs) > 1 else outputs[0])
    else:
        cls.forward(ctx, *args, **kwargs)  # what it saves, on the series
    return ctx


def _bound(cls, args, kwargs) -> tuple:
    if not kwargs:
        return tuple(args)
    forward = inspect.signature(cls.forward)
    if not has_setup_context(cls):
        args = (None, *args)
    bound = forward.bind(*args, **kwargs)
    bound.apply_defaults()
    values = tuple(bound.arguments.values())
    return values if has_setup_context(cls) else values[1:]


def _slope(x, degree: int, materialize: bool):
    slope = taylor.derivative(x, degree)
    if slope is None and materialize and (x.is_floating_point() or x.is_complex()):
        return torch.zeros_like(taylor.value_of(x))
    return slope


def _integrated(value, result, degree: int):
    if not isinstance(value, torch.Tensor) or result is None:
        return value
    coefficients = [value]
    for k in range(1, degree + 1):
        c = taylor.coefficient(result, k - 1)
        coefficients.append(None if c is None else c / k)
    return taylor.series(coefficients)
