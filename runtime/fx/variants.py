"""Functional variants: the ops functionalisation writes for ops that update an
argument in place, and the op each stands for.

`copy(self, src)` is `copy_` on a copy of self (it returns self's new value);
`_native_batch_norm_legit_functional(...)` is `_native_batch_norm_legit` with the
new running statistics returned after its own outputs. Their kernels are the
original op's: the extra outputs carry no tangent, and an in-place JVP kernel,
which may write self's tangent, is given a copy of it.
"""

from __future__ import annotations

import dataclasses

import torch

from ..rules.rule import Rule
from ..rules.table import rule_for_tracing


def stands_for(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The op `op` is the functional variant of, or None."""
    name = op._schema.name.split("::")[-1]
    if name.endswith("_functional"):
        return _overload(name.removesuffix("_functional"), op)
    base = _overload(f"{name}_", op)
    if base is None or not base._schema.arguments[0].alias_info:
        return None
    return base if base._schema.arguments[0].alias_info.is_write else None


def jvp_rule(op: torch._ops.OpOverload) -> Rule | None:
    """The JVP rule of the op `op` stands for, called as `op`'s."""
    base = stands_for(op)
    rule = None if base is None else rule_for_tracing(base)
    if rule is None or (rule.kind == "inplace" and rule.input_indices[:1] != (0,)):
        return None
    returns = len(base._schema.returns)
    extra = len(op._schema.returns) - returns
    call = rule.call

    def as_variant(primals, tangents, outputs):
        primals, outputs = as_base(op, base, primals, outputs)
        if rule.kind == "inplace" and tangents[0] is not None:
            # The kernel may update self's tangent; here self is not updated.
            tangents = [tangents[0].clone(), *tangents[1:]]
        results = call(primals, tangents, outputs)
        if not extra:
            return results
        return (*(results if returns > 1 else (results,)), *[None] * extra)

    return dataclasses.replace(
        rule,
        op=op,
        call=as_variant,
        differentiable_outputs=(*rule.differentiable_outputs, *[False] * extra),
    )


def as_base(op, base, arguments: list, outputs) -> tuple[list, list]:
    """The arguments and outputs `base`'s kernels read, from `op`'s: the base's
    own outputs, and each argument it writes (a `*_functional` variant's: not
    self) as it is after the write, which the variant returns after them."""
    returns = len(base._schema.returns)
    outputs = list(outputs)
    if op._schema.name.endswith("_functional"):
        arguments = list(arguments)
        written = [
            i
            for i, a in enumerate(base._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        for k, i in enumerate(written):
            arguments[i] = outputs[returns + k]
    return arguments, outputs[:returns]


def _overload(name: str, like):
    """aten's `name` with the overload name of `like`, taking as many arguments."""
    packet = getattr(torch.ops.aten, name, None)
    base = getattr(packet, like._overloadname, None) if packet is not None else None
    if base is None or len(base._schema.arguments) != len(like._schema.arguments):
        return None
    return base
