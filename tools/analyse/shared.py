"""Outputs that share one call: `svd_tangents(...)[0]`, `[1]`, `[2]` for U, S
and Vh. Formulas are pure tensor math (tools/check/admissible.py), so a call
written the same way in several outputs' formulas gives the same value in each:
the kernel runs it once and indexes the result. Read by both emitters.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .plan import Action, JvpPlan, OutputTangent, SharedCall


def shared_calls(outputs: tuple[OutputTangent | None, ...]) -> tuple[SharedCall, ...]:
    """The groups of two or more outputs whose every printed branch returns
    `call[k]` for one call (the same in each output), with a constant k of its
    own (no two outputs the same k), under the same conditions and the same zero
    fills."""
    groups: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    calls: dict[tuple, tuple[ast.expr, ...]] = {}
    for out in outputs:
        if out is None:
            continue
        indexed = _indexed_calls(out)
        if indexed is None:
            continue
        index, branch_calls = indexed
        live = [b for b in out.branches if b.action is not Action.NONE]
        key = tuple(
            (b.tested(), b.zeros_to_fill, b.lists_to_fill, ast.dump(call))
            for b, call in zip(live, branch_calls)
        )
        groups[key].append((out.output, index))
        calls.setdefault(key, branch_calls)
    return tuple(
        SharedCall(
            tuple(name for name, _ in members),
            tuple(index for _, index in members),
            calls[key],
        )
        for key, members in groups.items()
        # the same index twice would give two outputs one tangent object
        if len(members) > 1 and len({i for _, i in members}) == len(members)
    )


def _indexed_calls(out: OutputTangent) -> tuple[int, tuple[ast.expr, ...]] | None:
    """(k, the call of each printed branch) when every printed branch returns
    `call[k]` with the same k; None otherwise."""
    live = [b for b in out.branches if b.action is not Action.NONE]
    if not live or any(b.action is not Action.RETURN for b in live):
        return None
    indices, branch_calls = set(), []
    for b in live:
        e = b.expr
        if not (
            isinstance(e, ast.Subscript)
            and isinstance(e.value, ast.Call)
            and isinstance(e.slice, ast.Constant)
            and type(e.slice.value) is int
        ):
            return None
        indices.add(e.slice.value)
        branch_calls.append(e.value)
    if len(indices) != 1:
        return None
    return indices.pop(), tuple(branch_calls)


def shared_local(number: int) -> str:
    """The local that holds a kernel's number-th shared call's result."""
    return "shared_tangents" if number == 0 else f"shared_tangents_{number}"


@dataclass(frozen=True)
class SharedBlock:
    """One block of a kernel that sets several outputs' tangents from one call."""

    number: int  # the call's place in JvpPlan.shared (its local's name)
    call: SharedCall
    outputs: tuple[OutputTangent, ...]  # one per call.outputs


def blocks(
    jvp: JvpPlan, keep: Callable[[SharedCall], bool] = lambda call: True
) -> Iterator[OutputTangent | SharedBlock]:
    """A kernel's blocks in output order, for both emitters: an output's own, or
    a shared call's at its first output. A call `keep` refuses (one a backend
    cannot hold as a list) stays one block per output."""
    by_name = {o.output: o for o in jvp.outputs if o is not None}
    group_of = {
        name: (number, call)
        for number, call in enumerate(jvp.shared)
        if keep(call)
        for name in call.outputs
    }
    for out in jvp.outputs:
        if out is None:
            continue
        if out.output not in group_of:
            yield out
            continue
        number, call = group_of[out.output]
        if call.outputs[0] == out.output:
            yield SharedBlock(
                number, call, tuple(by_name[name] for name in call.outputs)
            )
