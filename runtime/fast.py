"""The C++ hot path's Python side: when the mode calls it, and what it knows.

With the C++ kernel backend, `DualMode.__torch_dispatch__` first offers each op to
the extension's `dispatch` (csrc/dualgen/fast_path.cpp), which either handles it
whole or answers `SLOW` before running anything; the Python path then handles it
as always. `describe(op)` tells the hot path whether an op's rule is a generated
functional kernel it may run; it caches the answer per op, so whatever changes a
rule (register_jvp, unregister_jvp, using_kernels, the backend) calls `forget()`.
"""

from __future__ import annotations

SLOW = object()  # the hot path declined: the Python path runs the op

# The extension's dispatch, make_dual and unpack_dual while the C++ backend is
# in use.
dispatch = None
make_dual = None
unpack_dual = None
_extension = None


def enable(extension) -> None:
    """Offer ops to `extension`'s hot path from now on."""
    global dispatch, make_dual, unpack_dual, _extension
    from .levels import _NO_TANGENT, FORWARD_BASE, STATE, TANGENTS, use_store

    if _extension is not extension:
        extension.bind_state(STATE, TANGENTS, _NO_TANGENT, FORWARD_BASE, SLOW, describe)
        _extension = extension
    dispatch, make_dual = extension.dispatch, extension.make_dual
    unpack_dual = extension.unpack_dual
    extension.set_front(None)  # front_ops() skips ops with a kernel there: ours too
    extension.set_front(front_ops())
    extension.set_batching(batching_ops())
    use_store(extension.SavedOutputs, extension.drop_entries)  # the hot path's


def disable() -> None:
    """The Python path handles every op (what the hot path knows of each op
    stays: it does not depend on the backend)."""
    global dispatch, make_dual, unpack_dual
    from .levels import SavedOutputs, _drop_entries, use_store

    dispatch = make_dual = unpack_dual = None
    use_store(SavedOutputs, _drop_entries)
    if _extension is not None:
        _extension.set_front(None)
        _extension.set_batching(None)


def forget() -> None:
    if _extension is not None:
        _extension.forget_ops()


def describe(op):
    """(C++ kernel, differentiable input positions, which are lists, which
    outputs are differentiable, the note its errors get, whether it is a view,
    whether its formula reads the outputs, whether it is an in-place op, whether
    its formula reads self as it was) for an op the hot path may run; None if the
    Python path must (a user rule, a kernel table under test, an op without a
    generated C++ kernel, an in-place op whose self is not differentiable or
    that returns more than self)."""
    from . import rules
    from .missing import kernel_error_note

    if rules._KERNELS is not None or op in rules._USER_RULES:
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
    )


def front_ops() -> list:
    """The ops the extension's front kernel takes (csrc/dualgen/front.cpp): those
    with a generated C++ kernel the hot path may run, which reach dispatch as
    themselves (not decomposed first) and have no kernel of torch's own at that
    key."""
    import torch

    from . import rules
    from .mode import has_decomposition

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
    if _extension is not None and dispatch is not None:
        _extension.set_batching(batching_ops() if on else None)


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
    for (csrc/dualgen/batching.cpp): functional aten ops tagged pointwise, not
    random, of tensors and numbers only, returning tensors, which have no rule
    of torch's own (they ran once per batch element)."""
    import torch

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


def _batches_pointwise(op) -> bool:
    import torch

    schema = op._schema
    tags = op.tags
    if torch.Tag.pointwise not in tags or torch.Tag.nondeterministic_seeded in tags:
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
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    # (An op torch decomposes above the Batched key never reaches it.)
    return not has_kernel(op.name(), "Batched") and not has_kernel(
        op.name(), "CompositeImplicitAutograd"
    )
