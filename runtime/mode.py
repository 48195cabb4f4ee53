"""The dispatch mode that computes tangents for every aten op inside a dual level.

For an op whose inputs carry tangents, the mode finds the innermost level L that has
any, runs the op and its JVP rule for L, and attaches the output tangents. Both run
with the mode itself handling only the levels below L, so outer levels differentiate
the primal and the tangent computation of L alike (nesting gives higher-order
derivatives). The JVP rule runs with autograd re-enabled, so tangents are
differentiable in reverse mode. Ops without tangent inputs cost one scan of their
arguments.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _pop_mode,
    _push_mode,
)

from .levels import (
    MISSING,
    STATE,
    Level,
    own_tangent,
    set_tangent,
    view_of_tangent,
)
from .rules import Rule, rule_for


def is_differentiable_dtype(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def autograd_enabled():
    """Re-enable the keys the user's context does not exclude (autograd among them),
    which are excluded below autograd where the mode runs; the included keys stay
    as they are now (the Python key only while the mode is pushed)."""
    return torch._C._ForceDispatchKeyGuard(
        torch._C._dispatch_tls_local_include_set(), STATE.user_exclude
    )


class handling_levels_below:
    """Within: the mode sees only levels below `level` (and nothing if none).

    A class rather than a generator: it runs on every op with tangents."""

    __slots__ = ("level", "mode", "previous", "pushed")

    def __init__(self, level: Level, mode):
        self.level = level
        self.mode = mode

    def __enter__(self) -> None:
        self.previous = STATE.cap
        STATE.cap = self.level.index - 1
        # Inside __torch_dispatch__ the mode is off the stack; from user code
        # (unpack_dual deriving a view's tangent) it is still on it.
        self.pushed = (
            self.level.index > 0 and _get_current_dispatch_mode() is not self.mode
        )
        if self.pushed:
            _push_mode(self.mode)

    def __exit__(self, *exc) -> None:
        if self.pushed:
            _pop_mode()
        STATE.cap = self.previous


def tangent_of(t: torch.Tensor, level: Level) -> torch.Tensor | None:
    """t's tangent at `level`: its own, the same view of its base's, or a saved
    output's (autograd rebuilds saved outputs as new tensors)."""
    own = own_tangent(t, level)
    if own is not MISSING:
        return own
    base = t._base
    if base is not None:
        base_tangent = tangent_of(base, level)
        if base_tangent is None:
            return None
        with handling_levels_below(level, STATE.mode), autograd_enabled():
            derived = view_of_tangent(base_tangent, t, base)
        set_tangent(t, level, derived)
        return derived
    if level.saved:
        record = level.saved.get(geometry(t))
        if record is not None:
            value = record.tangents.get(level)
            if isinstance(value, torch.Tensor):
                set_tangent(t, level, value)
                return value
    return None


def geometry(t: torch.Tensor) -> tuple:
    return (
        t.untyped_storage().data_ptr(),
        t.storage_offset(),
        tuple(t.shape),
        t.stride(),
        t.dtype,
    )


class SavedOutput:
    """What autograd keeps for a saved op output that has tangents: its data, and
    its tangents, found again by storage and geometry when the backward runs."""

    __slots__ = ("__weakref__", "data", "tangents")

    def __init__(self, data: torch.Tensor, tangents: dict):
        self.data = data
        self.tangents = tangents


def pack_saved(t: torch.Tensor):
    outputs = STATE.last_outputs
    if outputs and any(t is o for o in outputs):
        from .levels import TANGENTS

        entries = t.__dict__.get(TANGENTS)
        if entries:
            with torch.utils._python_dispatch._disable_current_modes():
                record = SavedOutput(t.detach(), entries)
            key = geometry(t)
            for level in entries:
                level.saved[key] = record
            return record
    return t


def unpack_saved(packed):
    return packed.data if isinstance(packed, SavedOutput) else packed


def _tensors(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for item in v:
                if isinstance(item, torch.Tensor):
                    yield item


def innermost_level_with_tangent(args, kwargs) -> Level | None:
    levels = STATE.levels[: STATE.cap + 1]
    if not levels:
        return None
    tensors = list(_tensors(args))
    if kwargs:
        tensors.extend(_tensors(kwargs.values()))
    for level in reversed(levels):
        for t in tensors:
            if tangent_of(t, level) is not None:
                return level
    return None


class DualMode(TorchDispatchMode):
    """Runs every aten op; computes tangents where its inputs have them."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        level = innermost_level_with_tangent(args, kwargs)
        if level is None:
            return func(*args, **kwargs)
        return _dispatch_at(self, func, args, kwargs, level)


def _is_out_variant(schema) -> bool:
    return any(a.is_out for a in schema.arguments)


def _mutates(schema) -> bool:
    return any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments
    )


def _missing_rule(mode, func, args, kwargs, level):
    schema = func._schema
    name = (
        f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    )
    if _is_out_variant(schema):
        raise NotImplementedError(
            f"{name} is an out= variant: forward AD cannot write tangents into out=; "
            f"call the functional form instead"
        )
    message = (
        f"dualgen has no forward-mode (JVP) rule for {name}; add an entry to "
        f"derivatives.yaml (or register one with dualgen.register_jvp)"
    )
    if _mutates(schema):
        raise NotImplementedError(message)
    with handling_levels_below(level, mode):
        out = func(*args, **kwargs)
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    if any(
        isinstance(o, torch.Tensor) and is_differentiable_dtype(o)
        for o in _tensors(outputs)
    ):
        raise NotImplementedError(message)
    return out  # nothing differentiable comes out (comparisons, indices, sizes)


def bind(schema, args, kwargs) -> list:
    values = []
    n = len(args)
    for i, arg in enumerate(schema.arguments):
        if i < n and not arg.kwarg_only:
            values.append(args[i])
        elif arg.name in kwargs:
            values.append(kwargs[arg.name])
        else:
            values.append(arg.default_value if arg.has_default_value() else None)
    return values


def _tangent_arg(value, level: Level):
    if isinstance(value, torch.Tensor):
        return tangent_of(value, level) if is_differentiable_dtype(value) else None
    if isinstance(value, (list, tuple)):
        tangents = [
            (
                tangent_of(v, level)
                if isinstance(v, torch.Tensor) and is_differentiable_dtype(v)
                else None
            )
            for v in value
        ]
        return tangents if any(t is not None for t in tangents) else None
    return None


def _dispatch_at(mode, func, args, kwargs, level: Level):
    rule = rule_for(func)
    if rule is None:
        return _missing_rule(mode, func, args, kwargs, level)
    schema = func._schema
    primals = bind(schema, args, kwargs)
    tangents = [_tangent_arg(primals[i], level) for i in rule.input_indices]
    if all(t is None for t in tangents):
        with handling_levels_below(level, mode):
            return func(*args, **kwargs)
    inplace = rule.kind == "inplace"
    with handling_levels_below(level, mode):
        if inplace and rule.needs_original_self:
            with autograd_enabled():
                primals[0] = primals[0].clone()
        out = func(*args, **kwargs)
        outputs = (
            tuple(out)
            if isinstance(out, (tuple, list)) and len(schema.returns) > 1
            else (out,)
        )
        kernel_outputs = outputs
        if rule.uses_outputs and not inplace and _tracking(primals, tangents):
            # The primal above ran below autograd; formulas that read the output
            # need it inside the graph for reverse-over-forward.
            with autograd_enabled():
                tracked = func(*args, **kwargs)
            kernel_outputs = tuple(tracked) if len(schema.returns) > 1 else (tracked,)
        with autograd_enabled():
            result = rule.call(primals, tangents, kernel_outputs)
    results = result if len(schema.returns) > 1 else (result,)
    _attach(rule, level, outputs, results, primals, tangents)
    STATE.last_outputs = outputs
    return out


def _tracking(primals, tangents) -> bool:
    if not torch.is_grad_enabled():
        return False
    for v in list(_tensors(primals)) + list(
        _tensors(t for t in tangents if t is not None)
    ):
        if v.requires_grad:
            return True
    return False


def _attach(rule: Rule, level: Level, outputs, results, primals, tangents) -> None:
    if rule.kind == "inplace":
        has_self = rule.differentiable_inputs[:1] == ("self",)
        self_tangent = tangents[0] if has_self else None
        new = results[0]
        if new is None:
            return
        if self_tangent is not None:
            if new is not self_tangent:
                with autograd_enabled():
                    self_tangent.copy_(new)
            return
        set_new_tangent(outputs[0], level, new)
        return
    for output, value, differentiable in zip(
        outputs, results, rule.differentiable_outputs
    ):
        if isinstance(output, (list, tuple)):
            for o, v in zip(output, value or [None] * len(output)):
                _attach_one(rule, level, o, v if differentiable else None)
        else:
            _attach_one(rule, level, output, value if differentiable else None)


def _attach_one(rule: Rule, level: Level, output, value) -> None:
    if not isinstance(output, torch.Tensor):
        return
    if value is None or not is_differentiable_dtype(output):
        if rule.kind == "view" or output._base is not None:
            set_tangent(output, level, None)  # a non-differentiable view (detach)
        return
    if value.shape != output.shape:
        raise RuntimeError(
            f"JVP rule for {rule.op} ({rule.origin}) returned a tangent of shape "
            f"{list(value.shape)} for an output of shape {list(output.shape)}"
        )
    if rule.kind != "view":
        value = conform_layout(value, output)
    set_tangent(output, level, value)


def conform_layout(tangent: torch.Tensor, primal: torch.Tensor) -> torch.Tensor:
    """The tangent in the primal's memory layout (views of it then match views of
    the primal). A copy only where the strides differ."""
    if tangent.stride() == primal.stride() or primal.numel() <= 1:
        return tangent
    with autograd_enabled():
        laid_out = torch.empty_strided(
            primal.size(), primal.stride(), dtype=tangent.dtype, device=tangent.device
        )
        return laid_out.copy_(tangent)


def set_new_tangent(t: torch.Tensor, level: Level, value: torch.Tensor) -> None:
    """Give `t`, which had no tangent at `level`, the tangent `value`. If t is a view,
    the tangent lives on its base (zeros elsewhere), so the base and its other
    views see it."""
    base = t._base
    if base is None or own_tangent(t, level) is None:
        set_tangent(t, level, conform_layout(value, t))
        return
    base_tangent = tangent_of(base, level)
    with autograd_enabled():
        if base_tangent is None:
            base_tangent = torch.empty_strided(
                base.size(), base.stride(), dtype=base.dtype, device=base.device
            )
            base_tangent.zero_()
            set_tangent(base, level, base_tangent)
        view_tangent = view_of_tangent(base_tangent, t, base)
        view_tangent.copy_(value)
    set_tangent(t, level, view_tangent)
