"""The C++ hot path's policy: which ops it may take and what it knows of each.

With the C++ kernel backend, `DualMode.__torch_dispatch__` first offers each op to
the extension's `dispatch` (csrc/dualgen/hot_path.cpp), which either handles it
whole or answers `SLOW` before running anything; the Python path then handles it
as always. `enable` binds the extension to the runtime's state when the C++
backend is chosen (this module follows `dualgen.backend`), `disable` when the
Python one is. `describe(op)` tells the hot path whether an op's rule is a
generated functional kernel it may run; the extension caches the answer per op,
so whatever changes a rule (register_jvp, unregister_jvp, using_kernels, the
backend) calls `state.forget()`. What the mode reads on every op is in
`state.py`.
"""

from __future__ import annotations

import torch

from .. import backend
from ..dispatch.decompositions import has_decomposition
from ..dispatch.inplace import view_form
from ..dispatch.tracked import defers
from ..levels import (
    FORWARD_BASE,
    NO_TANGENT,
    STATE,
    TANGENTS,
    SavedOutputs,
    drop_entries,
    use_store,
)
from ..missing import kernel_error_note
from ..rules import table as rules
from . import state


def enable(extension) -> None:
    """Offer ops to `extension`'s hot path from now on."""
    if state.extension is not extension:
        extension.bind_state(
            STATE, TANGENTS, NO_TANGENT, FORWARD_BASE, state.SLOW, describe
        )
        state.extension = extension
    state.dispatch, state.make_dual = extension.dispatch, extension.make_dual
    state.unpack_dual = extension.unpack_dual
    extension.set_front(None)  # front_ops() skips ops with a kernel there: ours too
    extension.set_front(front_ops())
    extension.set_batching(batching_ops())
    use_store(extension.SavedOutputs, extension.drop_entries)  # the hot path's


def disable() -> None:
    """The Python path handles every op (what the hot path knows of each op
    stays: it does not depend on the backend)."""
    state.dispatch = state.make_dual = state.unpack_dual = None
    use_store(SavedOutputs, drop_entries)
    if state.extension is not None:
        state.extension.set_front(None)
        state.extension.set_batching(None)


def follow_backend(name: str) -> None:
    """Point the mode's hot path at the backend's (C++ only)."""
    if name == "cpp":
        from .. import cpp

        enable(cpp.extension())
    else:
        disable()


backend.follow(follow_backend)


def describe(op):
    """(C++ kernel, differentiable input positions, which are lists, which
    outputs are differentiable, the note its errors get, whether it is a view,
    whether its formula reads the outputs, whether it is an in-place op, whether
    its formula reads self as it was, an in-place view op's out-of-place view op
    or None, what the front kernel does where autograd records it
    (`front_when_recorded`)) for an op the hot path may run; None if the
    Python path must (a user rule, a kernel table under test, an op without a
    generated C++ kernel, an in-place op whose self is not differentiable or
    that returns more than self)."""
    if rules.under_test() or rules.has_user_rule(op) or _makes_nested(op):
        return None
    info = rules.generated_kernels().get(op)
    if info is None or info.cpp_kernel is None:
        return None
    rule = rules.rule_for(op)
    inplace = info.kind == "inplace"
    if inplace:
        if rule.input_indices[:1] != (0,) or len(op._schema.returns) != 1:
            return None
    elif info.kind not in ("functional", "view"):
        return None
    arguments = op._schema.arguments
    lists = tuple(str(arguments[i].type).startswith("List") for i in rule.input_indices)
    return (
        info.cpp_kernel,
        rule.input_indices,
        lists,
        rule.differentiable_outputs,
        kernel_error_note(op, rule.origin),
        info.kind == "view",
        rule.uses_outputs,
        inplace,
        rule.needs_original_self,
        view_form(op) if inplace and torch.Tag.inplace_view in op.tags else None,
        front_when_recorded(op, info.kind, rule.uses_outputs),
    )


def _makes_nested(op) -> bool:
    """torch's nested-tensor family (`_nested_tensor_from_tensor_list`,
    `_nested_from_padded`, ...): ops that make nested tensors from plain ones,
    which the hot path, computing with plain strided tensors, would not know
    for nested until it had run the op. (On nested arguments it declines.)"""
    return op._schema.name.startswith("aten::_nested_")


# What the front kernel does where autograd records an op (front_when_recorded).
ONCE, AGAIN, MODE = 0, 1, 2


def front_when_recorded(op, kind: str, uses_outputs: bool) -> int:
    """What the front kernel does with `op` where autograd records it
    (hot_path.cpp, `run_bound`): `ONCE`, `AGAIN` (the op runs a second time,
    recorded on a node of its own, for the formula to read) or `MODE` (it
    declines: the mode's Python path takes the op).

    A formula that reads the user's outputs gives the tangent a graph holding
    the user's node, which holds the tangent for forward over reverse: a cycle
    through autograd's C++ graph that lives until the level ends (native forward
    AD has it too). An op that computes the same outputs again and changes
    nothing runs again, where its operands are small (`runs_again` there: at
    larger sizes the mode's round trip costs less): no argument it writes
    (batch norm's running statistics), no random draw, no aliasing or list
    outputs. An op whose backward needs a single node (`tracked.defers`) runs
    once, as native does; the rest go to the mode, which records them once and
    holds their tangents from the node (saved_tangents.py)."""
    if not uses_outputs or defers(op):
        return ONCE
    schema = op._schema
    if (
        kind != "functional"
        or torch.Tag.nondeterministic_seeded in op.tags
        or any(a.alias_info is not None for a in schema.arguments)
        or any(str(r.type).startswith("List") for r in schema.returns)
    ):
        return MODE
    return AGAIN


def front_ops() -> list:
    """The ops the extension's front kernel takes (csrc/dualgen/hot_path_front.cpp): those
    with a generated C++ kernel the hot path may run, which reach dispatch as
    themselves (not decomposed first) and have no kernel of torch's own at that
    key."""
    ops = []
    for op, info in rules.generated_kernels().items():
        if info.cpp_kernel is None or not op.name().startswith("aten::"):
            continue
        if has_decomposition(op) or torch._C._dispatch_has_kernel_for_dispatch_key(
            op.name(), "PythonTLSSnapshot"
        ):
            continue
        ops.append(op)
    return ops


def set_batching_rules(on: bool) -> None:
    """Register (on) or remove dualgen's legacy-vmap batching rules while the
    C++ backend is in use; benchmarks remove them to time torch as it ships
    (the rules speed torch's own vectorized jacobians up too)."""
    if state.extension is not None and state.dispatch is not None:
        state.extension.set_batching(batching_ops() if on else None)


_BATCHING_OPS: list | None = None


def batching_ops() -> list:
    """The ops the rules are for (found once, before any is registered: an op
    with one of them has a Batched kernel)."""
    global _BATCHING_OPS
    if _BATCHING_OPS is None:
        _BATCHING_OPS = _ops_without_batching_rules()
    return _BATCHING_OPS


def _ops_without_batching_rules() -> list:
    """The ops the extension gives legacy vmap an element-wise batching rule
    for (csrc/dualgen/batching.cpp): functional aten ops that are element-wise,
    not random, of tensors and numbers only, returning tensors, which have no
    rule of torch's own (they ran once per batch element). Element-wise: tagged
    pointwise; or an overload of an op another overload of which is
    (`where.ScalarOther`); or the backward of one, taking no int (a loss's
    reduction, which divides by the element count) (`hardtanh_backward`,
    `elu_backward`, `softplus_backward`: the tangents of activations)."""
    ops = []
    for name in torch._C._dispatch_get_all_op_names():  # "aten::add.Tensor"
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::") :].partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if _batches_pointwise(op):
            ops.append(op)
    return ops


def _element_wise(op) -> bool:
    if torch.Tag.pointwise in op.tags:
        return True
    packet = op.overloadpacket
    if any(_scalar_variant(op, other) for other in _pointwise_overloads(packet)):
        return True
    name = packet.__name__
    if not name.endswith("_backward") or any(
        str(a.type) in ("int", "SymInt") for a in op._schema.arguments
    ):
        return False
    forward = getattr(torch.ops.aten, name.removesuffix("_backward"), None)
    return forward is not None and bool(_pointwise_overloads(forward))


def _pointwise_overloads(packet) -> list:
    overloads = (getattr(packet, o) for o in packet.overloads())
    return [o for o in overloads if torch.Tag.pointwise in o.tags]


def _scalar_variant(op, other) -> bool:
    """op takes other's arguments, by name, with numbers for some tensors
    (`where.ScalarOther` of `where.self`)."""
    mine, theirs = op._schema.arguments, other._schema.arguments
    return len(mine) == len(theirs) and all(
        a.name == b.name
        and (
            str(a.type) == str(b.type)
            or (str(a.type), str(b.type)) == SCALAR_FOR_TENSOR
        )
        for a, b in zip(mine, theirs)
    )


SCALAR_FOR_TENSOR = ("number", "Tensor")  # (a Scalar argument's type)


def _batches_pointwise(op) -> bool:
    schema = op._schema
    tags = op.tags
    if not _element_wise(op) or torch.Tag.nondeterministic_seeded in tags:
        return False
    if schema.is_mutable or not schema.returns:
        return False
    if any(str(r.type) != "Tensor" for r in schema.returns):
        return False
    if any(
        str(a.type).startswith(("List", "Tensor[]", "Tensor?[]"))
        for a in schema.arguments
    ):
        return False
    # (Composite ops too: legacy vmap's loop, a fallback at the Batched key,
    # takes them before their decomposition would run.)
    return not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Batched")
