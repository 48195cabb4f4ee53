"""The dispatch mode that computes tangents for every aten op inside a dual level.

For an op whose inputs carry tangents, the mode finds the innermost level L that has
any, runs the op and its JVP rule for L, and attaches the output tangents. Both run
with the mode itself handling only the levels below L, so outer levels differentiate
the primal and the tangent computation of L alike (nesting gives higher-order
derivatives). The JVP rule runs with autograd re-enabled, so tangents are
differentiable in reverse mode. Ops without tangent inputs cost one scan of their
arguments.

This module is the mode and its dispatch: finding the level, binding arguments,
looking up rules and reporting missing ones. Around it: `tangents` (finding a
tangent, the dispatch contexts), `layout` and `dtypes` (how a tangent is stored),
`outputs` (attaching output tangents), `inplace` (in-place updates), `tracked`
(running an op under autograd for reverse-over-forward) and `subclasses` (tensor
subclasses with a dispatch of their own, jagged nested tensors among them).
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
)

from .. import torch_features
from ..collectives.table import NAMESPACES as COLLECTIVE_NAMESPACES
from ..dtypes import (
    in_complex_primal_dtypes,
    in_native_dtypes,
    real_tangent_of_complex,
    tangents_have_primal_dtypes,
)
from ..hot_path import state as hot_path_state
from ..layout import is_batched
from ..levels import (
    STATE,
    Level,
    note_view,
    resolve_pending,
    set_tangent,
)
from ..missing import (
    kernel_error_note,
    no_rule_message,
    out_variant_message,
    qualified_name,
)
from ..rules.table import rule_for
from ..saved_tangents import move_saved_tangents
from ..tangents import (
    argument_tangent,
    autograd_enabled,
    handling_levels_below,
    is_differentiable_dtype,
    remember_saved_outputs,
    tangent_of,
    tensors_in,
)
from .decompositions import has_decomposition
from .higher_order import dispatch_higher_order, is_higher_order
from .inplace import (
    batched_view_tangent,
    call_with,  # noqa: F401 - imported from here (tests)
    run_inplace_tracked,
    separate_from_self,
    storage_key,
    update_self,
    write_shared,
    writes_shared,
    written_positions,
)
from .jagged import any_jagged
from .op_arguments import bind
from .outputs import attach_outputs, shared_with_inputs
from .subclasses import deferring, dispatches_itself, jagged_op
from .tracked import PYTHON_KEYS, autograd_records, defer_formula, defers, run_tracked


def innermost_level_with_tangent(tensors) -> Level | None:
    levels = STATE.levels[: STATE.cap + 1]
    for level in reversed(levels):
        for t in tensors:
            if tangent_of(t, level) is not None:
                return level
    return None


def tensor_arguments(args, kwargs) -> list:
    """The tensors among an op's arguments (in lists too), in one pass: the mode
    reads them twice per op."""
    tensors = []
    for v in args:
        if isinstance(v, torch.Tensor):
            tensors.append(v)
        elif isinstance(v, (list, tuple)):
            tensors.extend(item for item in v if isinstance(item, torch.Tensor))
    if kwargs:
        tensors.extend(tensors_in(kwargs.values()))
    return tensors


def disabling_dynamo_only_while_active(cls):
    """Class decorator for a TorchDispatchMode: its `__torch_dispatch__` goes
    through torch's Dynamo-disabling wrapper only while Dynamo is active.

    torch wraps a mode's `__torch_dispatch__` in `torch._disable_dynamo`, which
    imports torch._dynamo (seconds) on the first call and then, on every call,
    clears the thread's eval-frame callback around the function (several µs per
    op). With no callback set (nothing compiling or running compiled code on
    this thread, always so before torch._dynamo is imported) that wrapper only
    calls the function: this calls it directly then, and torch's wrapper
    otherwise. Its own frames are marked for Dynamo to skip, like torch's
    wrapper's (in torch's files)."""
    disabled = cls.__dict__["__torch_dispatch__"]
    raw = getattr(disabled, "__wrapped__", None)
    if raw is None:  # not wrapped (`_should_skip_dynamo` is False)
        return cls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _eval_frame_callback() is None:
            return raw(self, func, types, args, kwargs)
        return disabled(self, func, types, args, kwargs)

    __torch_dispatch__.__wrapped__ = raw
    __torch_dispatch__.__qualname__ = raw.__qualname__
    __torch_dispatch__.__doc__ = raw.__doc__
    _skipped_by_dynamo(__torch_dispatch__.__code__)
    cls.__torch_dispatch__ = __torch_dispatch__
    return cls


# The thread's Dynamo eval-frame callback (None: Dynamo is idle here).
_eval_frame_callback = getattr(
    getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None),
    "get_eval_frame_callback",
    lambda: True,  # a torch without it: always torch's wrapper
)


def _skipped_by_dynamo(code) -> None:
    """`torch._dynamo.eval_frame.skip_code`, without importing torch._dynamo."""
    eval_frame = getattr(torch._C, "_dynamo", None)
    eval_frame = getattr(eval_frame, "eval_frame", None)
    try:
        eval_frame.set_code_exec_strategy(
            code,
            eval_frame._FrameExecStrategy(
                eval_frame._FrameAction.SKIP, eval_frame._FrameAction.DEFAULT
            ),
        )
    except AttributeError:  # a torch without it: nothing to mark
        pass


@disabling_dynamo_only_while_active
class DualMode(TorchDispatchMode):
    """Runs every aten op; computes tangents where its inputs have them."""

    # Higher-order operators come to __torch_dispatch__ (higher_order.py).
    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if is_higher_order(func):
            return dispatch_higher_order(self, func, args, kwargs or {})
        hot_path = hot_path_state.dispatch
        if hot_path is not None:
            out = hot_path(func, types, args, kwargs)
            if out is not hot_path_state.SLOW:
                return out
        if STATE.defer_next:
            STATE.defer_next = False
            return NotImplemented  # the subclass runs it (subclasses.deferring)
        if STATE.saved_to_move:
            move_saved_tangents()  # onto their outputs' nodes (saved_tangents.py)
        if STATE.pending:
            resolve_pending()  # an earlier op's tangents (tracked.defer_formula)
        kwargs = kwargs or {}
        subclass_op = dispatches_itself(types)
        if subclass_op and any_jagged(args, kwargs):
            return jagged_op(self, func, types, args, kwargs)
        tensors = tensor_arguments(args, kwargs)
        if subclass_op is not STATE.subclass_op:
            previous, STATE.subclass_op = STATE.subclass_op, subclass_op
            try:
                return self._entered(func, args, kwargs, tensors)
            finally:
                STATE.subclass_op = previous
        return self._entered(func, args, kwargs, tensors)

    def _entered(self, func, args, kwargs, tensors):
        if _any_lazy_view(tensors):
            with native_dispatch_keys():
                return self._dispatch(func, args, kwargs, tensors)
        return self._dispatch(func, args, kwargs, tensors)

    def _dispatch(self, func, args, kwargs, tensors):
        if (
            func.namespace in COLLECTIVE_NAMESPACES
            and STATE.cap >= 0
            and _is_fwd_grad_enabled()
        ):
            torch_features.require("collectives")
            from ..collectives.dual import run  # (torch.distributed: when used)

            return run(self, func, args, kwargs)
        level = None
        if STATE.cap >= 0 and _is_fwd_grad_enabled():
            level = innermost_level_with_tangent(tensors)
        if level is None:
            out = (
                deferring(self, func, args, kwargs)
                if STATE.subclass_op
                else (func(*args, **kwargs))
            )
        else:
            out = _dispatch_at(self, func, args, kwargs, level)
        if func.is_view and func is not _DETACH:
            _note_views(out, args)
        return out


_DETACH = torch.ops.aten.detach.default  # a view whose tangent is never derived
# With forward grad disabled (torch._C._set_fwd_grad_enabled(False), as torch's own
# transforms do) no level's tangents are seen: ops give no tangents, in-place ops
# leave self's as it was, and views still follow their base's (as native).
_is_fwd_grad_enabled = torch._C._is_fwd_grad_enabled


_ALIAS = torch.ops.aten.alias.default


def alias(tensor: torch.Tensor) -> torch.Tensor:
    """`aten.alias(tensor)` as the mode runs it. A plain tensor with no tangent
    at a visible level skips the mode (make_dual's common case: the mode would
    only run the op and note the view; another mode above it must see it)."""
    if (
        not _acts_plainly(type(tensor))
        or STATE.mode is None
        or _get_current_dispatch_mode() is not STATE.mode
        or innermost_level_with_tangent((tensor,)) is not None
    ):
        return _ALIAS(tensor)
    with torch._C._ExcludeDispatchKeyGuard(PYTHON_KEYS):
        out = _ALIAS(tensor)
    note_view(out, tensor)
    return out


# In-place ops whose native formula, for a self without a tangent, is an
# operand's tangent alone (copy_: `src_t`), not a promotion with self's
# zero-filled one: self gets that tangent in the operand's dtype.
_WRITES_OPERAND_AS_IS = frozenset({torch.ops.aten.copy_.default})


def _copies_within(primals, tangents) -> bool:
    """Whether copy_'s source overlaps self's memory, and its tangent self's
    tangent's (`x[...] = x[:, 0]`)."""
    source, self_tangent, source_tangent = primals[1], tangents[0], tangents[1]
    return (
        isinstance(self_tangent, torch.Tensor)
        and isinstance(source, torch.Tensor)
        and isinstance(source_tangent, torch.Tensor)
        and storage_key(source) == storage_key(primals[0])
        and storage_key(source_tangent) == storage_key(self_tangent)
    )


def _note_views(out, args) -> None:
    """Views of a tensor with tangents of its own follow that tensor's tangent,
    not their memory's owner's (`levels.forward_base`)."""
    source = args[0] if args else None
    if isinstance(source, torch.Tensor):
        for o in tensors_in(out if isinstance(out, (list, tuple)) else (out,)):
            note_view(o, source)


_LAZY_VIEW_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Conjugate) | (
    torch._C.DispatchKeySet(torch._C.DispatchKey.Negative)
)


def reads_lazy_views(args, kwargs) -> bool:
    """True if an argument is complex or a lazily negated view (`x.conj().imag`):
    only then can the Conjugate and Negative keys matter (`native_dispatch_keys`),
    so real-only ops skip the guard's cost."""
    return _any_lazy_view(tensor_arguments(args, kwargs))


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


def _acts_plainly(cls: type) -> bool:
    """torch.Tensor, or a subclass with neither dispatch nor torch function of
    its own (nn.Parameter): ops on it run as on a plain tensor."""
    return cls is torch.Tensor or (
        cls.__torch_dispatch__ is _PLAIN_DISPATCH
        and cls.__torch_function__ is torch._C._disabled_torch_function_impl
    )


def _any_lazy_view(tensors) -> bool:
    for t in tensors:
        if t.is_complex() or t.is_neg():
            return True
    return False


def native_dispatch_keys():
    """Inside __torch_dispatch__ torch excludes the Conjugate and Negative keys, so
    kernels that build conjugate views internally (linalg_pinv, linalg_lstsq's
    residuals) compute wrong complex values. Re-include them, as outside a mode."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    return torch._C._ForceDispatchKeyGuard(
        torch._C._dispatch_tls_local_include_set(), excluded - _LAZY_VIEW_KEYS
    )


def _is_out_variant(schema) -> bool:
    return any(a.is_out for a in schema.arguments)


def _mutates(schema) -> bool:
    return any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments
    )


def _missing_rule(mode, func, args, kwargs, level):
    schema = func._schema
    if _is_out_variant(schema):
        raise NotImplementedError(out_variant_message(func))
    twin = _ATEN_TWIN_OF_PRIM.get(func)
    if twin is not None:
        # Autograd adds a gradient to an efficient zero tensor through
        # torch._refs.add, which reaches prims: run the prim as its aten twin.
        return _dispatch_at(mode, twin, args, kwargs, level)
    if has_decomposition(func) and not any(
        t.is_nested for t in tensor_arguments(args, kwargs)
    ):
        # (On nested tensors torch runs a kernel of its own, not the decomposition.)
        # A composite op reached us below its usual decomposition (autograd's
        # zero tensors call `to` directly): run its aten ops through the mode.
        with mode:
            # The C++ kernel: a Python one (torch._refs) would reach prims.
            return func._op_dk(
                torch._C.DispatchKey.CompositeImplicitAutograd, *args, **kwargs
            )
    if _mutates(schema):
        raise NotImplementedError(no_rule_message(func))
    with handling_levels_below(level, mode):
        out = func(*args, **kwargs)
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    if any(
        isinstance(o, torch.Tensor) and is_differentiable_dtype(o)
        for o in tensors_in(outputs)
    ):
        raise NotImplementedError(no_rule_message(func))
    return out  # nothing differentiable comes out (comparisons, indices, sizes)


# Element-wise prims with an aten op of the same arguments and values (torch._refs
# has promoted their dtypes and broadcast their shapes already).
_ATEN_TWIN_OF_PRIM = {
    torch.ops.prims.add.default: torch.ops.aten.add.Tensor,
    torch.ops.prims.sub.default: torch.ops.aten.sub.Tensor,
    torch.ops.prims.mul.default: torch.ops.aten.mul.Tensor,
    torch.ops.prims.neg.default: torch.ops.aten.neg.default,
}


def _dispatch_at(mode, func, args, kwargs, level: Level):
    rule = rule_for(func)
    if rule is None:
        return _missing_rule(mode, func, args, kwargs, level)
    schema = func._schema
    primals = bind(schema, args, kwargs)
    indices = rule.input_indices
    tangents = [argument_tangent(primals[i], level) for i in indices]
    inplace = rule.kind == "inplace"
    threads_self = inplace and indices[:1] == (0,)
    # An in-place op whose self is not differentiable overwrites self's value:
    # a tangent self had does not enter, and becomes the kernel's value (zero
    # where no other tangent reaches self), as native and `self = op(self, ...)`.
    stale = (
        argument_tangent(primals[0], level) if inplace and not threads_self else None
    )
    if all(t is None for t in tangents) and stale is None:
        with handling_levels_below(level, mode):
            return func(*args, **kwargs)
    tracking = autograd_records(primals, tangents)
    promote = tangents_have_primal_dtypes(primals, tangents, indices)
    self_tangent = tangents[0] if threads_self else stale
    if (
        self_tangent is not None
        and torch.Tag.inplace_view in func.tags
        and is_batched(self_tangent)
    ):
        with handling_levels_below(level, mode):
            new_tangent = batched_view_tangent(func, primals, self_tangent)
            out = func(*args, **kwargs)
        set_tangent(primals[0], level, new_tangent)
        if tracking:
            remember_saved_outputs(level, (out,))
        return out
    if func in _WRITES_OPERAND_AS_IS and _copies_within(primals, tangents):
        # torch copies from memory overlapping self's as it writes (no copy of
        # the source first), so the tangent is copied the same way.
        with handling_levels_below(level, mode):
            out = func(*args, **kwargs)
            with autograd_enabled():
                self_tangent.copy_(tangents[1])
        if tracking:
            remember_saved_outputs(level, (out,))
        return out
    with handling_levels_below(level, mode):
        target = primals[0] if inplace else None
        if inplace:
            separate_from_self(primals, tangents, indices, self_tangent)
        if inplace and rule.needs_original_self:
            with autograd_enabled():
                primals[0] = primals[0].clone()
        if (
            threads_self
            and self_tangent is not None
            and tracking
            and torch.Tag.inplace_view not in func.tags
        ):
            # The formula must read a tangent that the update below does not
            # modify, or autograd's saved values would change under it. (An op
            # that changes only self's geometry, like transpose_, changes no
            # value: its tangent gets the same new geometry in place.)
            with autograd_enabled():
                tangents[0] = self_tangent.clone()
        many = len(schema.returns) > 1
        # Attaches a non-in-place op's output tangents: called below, or deferred.
        output_tangents = functools.partial(
            _output_tangents, func, rule, level, primals, tangents, promote
        )
        if rule.uses_outputs and tracking:
            # Reverse-over-forward needs the outputs the formula reads inside the
            # graph: the op runs once, under autograd (never twice: side effects
            # such as running statistics and random draws happen once).
            if inplace:
                out, kernel_outputs = run_inplace_tracked(
                    func, target, primals, rule.needs_original_self
                )
            else:
                out, kernel_outputs = run_tracked(func, args, kwargs, many)
                if (
                    hot_path_state.dispatch is None
                    and rule.kind != "inplace"
                    and defers(func)
                ):
                    defer_formula(
                        mode,
                        level,
                        output_tangents,
                        out if many else (out,),
                        kernel_outputs,
                    )
                    return out
        else:
            out = func(*args, **kwargs)
            kernel_outputs = tuple(out) if many else (out,)
        outputs = tuple(out) if many else (out,)
        with autograd_enabled():
            if not inplace:
                output_tangents(outputs, kernel_outputs)
            else:
                results = _formula_results(
                    func, rule, primals, tangents, promote, kernel_outputs
                )
                promote = promote and func not in _WRITES_OPERAND_AS_IS
                update_self(
                    level, outputs[0], self_tangent, results[0], promote, tangents
                )
                if writes_shared(func, self_tangent):
                    written = written_positions(rule, primals, tangents, kernel_outputs)
                    write_shared(self_tangent, results[0], written)
    if tracking:
        remember_saved_outputs(level, outputs)
    return out


def _formula_results(func, rule, primals, tangents, promote, kernel_outputs) -> tuple:
    """The rule's output tangents, one per output, in the dtypes native gives
    them unless `promote` (autograd enabled)."""
    many = len(func._schema.returns) > 1
    indices = rule.input_indices
    try:
        if all(t is None for t in tangents):
            result = (None,) * len(kernel_outputs) if many else None
        else:
            result = rule.call(primals, tangents, kernel_outputs)
    except Exception as exc:
        inputs = [primals[i] for i in indices]
        mixed = isinstance(exc, RuntimeError) and real_tangent_of_complex(
            inputs, tangents
        )
        if mixed and rule.kind == "view":
            raise RuntimeError(_needs_complex_tangent(func)) from exc
        if not mixed:
            exc.add_note(kernel_error_note(func, rule.origin))
            raise
        # A real tangent of a complex value is the complex tangent t + 0i; an op
        # of the formula that takes one dtype only (dot, mm) gets it so.
        try:
            result = rule.call(
                primals, in_complex_primal_dtypes(inputs, tangents), kernel_outputs
            )
        except RuntimeError:  # the original error says more
            exc.add_note(kernel_error_note(func, rule.origin))
            raise exc from None
    results = result if many else (result,)
    if not promote:
        results = in_native_dtypes(rule, primals, tangents, kernel_outputs, results)
    return results


def _output_tangents(
    func, rule, level, primals, tangents, promote, outputs, kernel_outputs
) -> None:
    """Compute and attach the tangents of a non-in-place op's `outputs` (the
    formula reads `kernel_outputs`; autograd enabled)."""
    results = _formula_results(func, rule, primals, tangents, promote, kernel_outputs)
    shared = None
    if rule.kind != "view":
        shared = shared_with_inputs(results, tangents)
    attach_outputs(rule, level, outputs, results, promote, shared)


def _needs_complex_tangent(func) -> str:
    """A view that reads a complex value's parts (conj, real, imag, view_as_real)
    cannot take a real tangent: it would have to be t + 0i, a new tensor, not a
    view of the tangent. Native forward AD fails there too, with an internal
    assert; say what to do instead."""
    return (
        f"{qualified_name(func)} of a complex tensor whose tangent is real: the view "
        "needs a complex tangent. Give the tangent the primal's dtype: "
        "make_dual(x, t.to(x.dtype))"
    )
