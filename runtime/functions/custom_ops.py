"""The autograd.Function torch.library makes for a custom op's `register_autograd`
(`torch._library.autograd.make_autograd_impl`): autograd calls it where an input
requires grad, so a dual with a recording tape reaches it rather than the op.
Its forward is the op itself, redispatched below autograd, and its backward
has no derivative of its own (torch's varlen attention: "no autograd formula"),
so the jvp is the op's rule where dualgen has one (generated or registered)."""

from __future__ import annotations

import torch

from ..dispatch.op_arguments import bind
from ..levels import Level
from ..tangents import argument_tangent

# The op -> rule lookup (dualgen.rules.table.rule_for), given by that module when
# it is imported: the rules import this package, not the other way round.
_lookup = None


def use_rule_lookup(rule_for) -> None:
    global _lookup
    _lookup = rule_for


def custom_op_of(cls: type) -> torch._ops.OpOverload | None:
    """The custom op whose autograd Function `cls` is (its forward closes over
    it), or None for any other Function."""
    if not cls.__name__.startswith("GeneratedBackwardFor_"):
        return None
    op = closed_over(cls.forward, "op")
    return op if isinstance(op, torch._ops.OpOverload) else None


def closed_over(fn, name: str):
    """The value `fn` closes over as `name` (torch makes these Function classes
    inside functions, whose locals say what they wrap), or None."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cell = cells.get(name)
    return None if cell is None else cell.cell_contents


def op_rule(cls: type):
    """(op, its rule) for a custom op's Function with a rule of dualgen's, else
    None."""
    op = custom_op_of(cls)
    if op is None or _lookup is None:
        return None
    rule = _lookup(op)
    return None if rule is None else (op, rule)


def op_rule_tangents(op, rule, inputs: tuple, level: Level, outputs: tuple) -> tuple:
    """The outputs' tangents at `level` from the op's rule: `inputs` are the
    Function's (the op's positional arguments, then the metadata holding its
    keyword-only ones)."""
    *args, metadata = inputs
    primals = bind(op._schema, tuple(args), dict(metadata.keyword_only_args))
    tangents = [argument_tangent(primals[i], level) for i in rule.input_indices]
    if all(t is None for t in tangents):
        return (None,) * len(outputs)
    result = rule.call(primals, tangents, list(outputs))
    return result if isinstance(result, tuple) else (result,)
