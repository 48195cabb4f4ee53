"""Custom `torch.autograd.Function`s under dual levels, as native forward AD runs them.

Native forward AD never looks inside a Function: it runs `forward` with forward
grad off and takes the outputs' tangents from the user's `jvp(ctx, *tangents)`.
The dispatch mode alone would instead differentiate the aten ops inside `forward`
(a straight-through `round` would get tangent 0), so while any level is active
`Function.apply` reaches `_apply`: it is installed as `_SingleLevelFunction.apply`,
which `Function.apply` calls through `super().apply` once it has bound
setup_context's defaults (so `my_fn = MyFunction.apply`, bound before any level
was entered, is covered too), in place of the C++ `_FunctionBase.apply`:

* it finds the innermost level L at which some input has a tangent, computes the
  primal with only the levels below L handled (recursively: each lower level with
  tangents also goes through `jvp`; at the bottom `forward` runs with no level
  handled), then calls `jvp` with the mode handling the levels below L, so outer
  levels differentiate it (higher order derivatives), and attaches what it returns
  at L after native's checks (in-place, view, non-differentiable outputs);
* `jvp` gets what native gives it: one tangent per input, zeros for a tensor
  input without one (unless `ctx.set_materialize_grads(False)`), None for the
  other arguments;
* the `ctx` that the C++ `_FunctionBase.apply` creates is caught in
  `BackwardCFunction.__init__`, and what `forward`/`setup_context` save or mark
  on it is recorded (C++ clears those fields before apply returns);
* a Function without `jvp` gets one derived from its `backward`, which is linear
  in its grad arguments: J t is the gradient, with respect to dummy grad_outputs v,
  of <backward(ctx, *v), t> (the double-backward trick). Where that cannot work the
  error names the Function and the fixes: a `jvp`, or `dualgen.register_jvp(cls)`.

torch.utils.checkpoint's reentrant Function runs its function directly while a
level is active. Everything is installed when the first level is entered and
removed when the last one exits (`install`/`uninstall`, from `dualgen.forward_ad`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.function import (
    BackwardCFunction,
    _SingleLevelFunction,
    once_differentiable,
)

from .levels import STATE, Level, set_tangent
from .mode import (
    conform_layout,
    handling_levels_below,
    is_differentiable_dtype,
    remember_saved_outputs,
    set_new_tangent,
    tangent_of,
    view_of_tangent,
)

__all__ = ["install", "register_function_jvp", "uninstall", "unregister_function_jvp"]

_C_APPLY = torch._C._FunctionBase.__dict__["apply"]


def _native_apply(cls, *args, **kwargs):
    """The C++ `_FunctionBase.apply` (what `_apply` stands in for)."""
    return _C_APPLY.__get__(None, cls)(*args, **kwargs)


_FIELDS = ("to_save", "saved_for_forward", "dirty_tensors", "non_differentiable")
_RAW = {name: torch._C._FunctionBase.__dict__[name] for name in _FIELDS}
_NEEDS_INPUT_GRAD = torch._C._FunctionBase.__dict__["needs_input_grad"]
_RECORD = "_dualgen_record"


# --------------------------------------------------------------------------------------
# catching the ctx and what is saved on it


@dataclass
class _Record:
    """What forward / setup_context put on a ctx (C++ clears the fields after)."""

    to_save: tuple | None = None
    saved_for_forward: tuple | None = None
    dirty_tensors: tuple | None = None
    non_differentiable: tuple | None = None


class _Capture(threading.local):
    def __init__(self) -> None:
        # One [backward class, ctx] frame per `_run_primal` in progress.
        self.pending: list[list] = []


_CAPTURE = _Capture()


def _ctx_init(self) -> None:
    """`BackwardCFunction.__init__` while installed: the C++ apply constructs the ctx
    (with no arguments) before calling forward, so the first ctx of the expected
    class after `_run_primal` opened its frame is that call's."""
    pending = _CAPTURE.pending
    if pending:
        frame = pending[-1]
        if frame[1] is None and type(self) is frame[0]:
            frame[1] = self
            self.__dict__[_RECORD] = _Record()


def _recording(name: str) -> property:
    """A property over the C++ field `name` that also records what is assigned on
    a caught ctx: FunctionCtx.save_for_backward & co. assign these fields."""
    raw = _RAW[name]

    def get(self):
        return raw.__get__(self, type(self))

    def set_(self, value) -> None:
        raw.__set__(self, value)
        record = self.__dict__.get(_RECORD)
        if record is not None:
            setattr(record, name, value)

    return property(get, set_, doc=f"ctx.{name}, recorded by dualgen")


_RAW_MATERIALIZE = torch._C._FunctionBase.__dict__["materialize_grads"]
_NO_MATERIALIZE = "_dualgen_no_materialize"


def _set_materialize(self, value) -> None:
    _RAW_MATERIALIZE.__set__(self, value)
    self.__dict__[_NO_MATERIALIZE] = not value


def _get_materialize(self):
    return _RAW_MATERIALIZE.__get__(self, type(self))  # not readable, as native


# ctx.set_materialize_grads(False) assigns it; C++ has it write-only.
_MATERIALIZE = property(_get_materialize, _set_materialize)


def _materializes(ctx) -> bool:
    return not ctx.__dict__.get(_NO_MATERIALIZE, False)


# --------------------------------------------------------------------------------------
# installing


_INSTALL_LOCK = threading.Lock()
_INSTALLED = 0  # threads with active levels; the patches are process-wide


_CTX_HOOKED = False


def install() -> None:
    """Hook Function.apply (first level entered, any thread). The ctx class is
    hooked once for good: changing BackwardCFunction's attributes updates every
    Function's backward class (about 12 µs a time, paid on every level entered
    otherwise), and the hooks do nothing unless `_apply` is catching a ctx."""
    global _INSTALLED, _CTX_HOOKED
    with _INSTALL_LOCK:
        _INSTALLED += 1
        if _INSTALLED > 1:
            return
        _SingleLevelFunction.apply = classmethod(_apply)
        if not _CTX_HOOKED:
            BackwardCFunction.__init__ = _ctx_init
            for name in _FIELDS:
                setattr(BackwardCFunction, name, _recording(name))
            BackwardCFunction.materialize_grads = _MATERIALIZE
            _CTX_HOOKED = True


def uninstall() -> None:
    """Undo the apply hook when the last thread's last level exits."""
    global _INSTALLED
    with _INSTALL_LOCK:
        _INSTALLED -= 1
        if _INSTALLED > 0:
            return
        _INSTALLED = 0
        if "apply" in _SingleLevelFunction.__dict__:
            del _SingleLevelFunction.apply


# --------------------------------------------------------------------------------------
# user rules and Functions run as plain code


_RULES: dict[type, Callable] = {}


def register_function_jvp(cls: type) -> Callable[[Callable], Callable]:
    """`dualgen.register_jvp(MyFunction)`: a decorator registering `rule(ctx,
    *tangents)` as MyFunction's jvp for dualgen (it takes precedence over the
    class's own `jvp`, and over the one derived from `backward`). It is called as
    native calls `jvp`: with the ctx (`ctx.saved_tensors` is what was given to
    `save_for_forward`) and one tangent per input (zeros for a tensor input
    without one, unless `ctx.set_materialize_grads(False)`; None for the others)."""
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"expected a torch.autograd.Function subclass, got {cls!r}")

    def decorate(rule: Callable) -> Callable:
        _RULES[cls] = rule
        return rule

    return decorate


def unregister_function_jvp(cls: type) -> None:
    """Remove a rule registered with `register_function_jvp`."""
    _RULES.pop(cls, None)


def _checkpoint_transparent(run_function, preserve_rng_state, *args):
    """torch.utils.checkpoint's reentrant Function has no jvp, and its backward is
    not differentiable in its grads (native raises). Its forward is just
    `run_function(*args)`: while a level is active, run that directly (without the
    memory saving), so the mode differentiates it (closure tensors with tangents
    too) and reverse mode still works."""
    return run_function(*args)


def _transparent() -> dict[type, Callable]:
    from torch.utils.checkpoint import CheckpointFunction

    return {CheckpointFunction: _checkpoint_transparent}


_TRANSPARENT: dict[type, Callable] | None = None


# --------------------------------------------------------------------------------------
# apply


@dataclass
class _Call:
    """One `cls.apply(*args, **kwargs)` that has inputs with tangents."""

    cls: type
    args: tuple
    kwargs: dict
    scan: list  # the tensors among args and kwargs
    grad_enabled: bool  # the user's grad mode (jvp and backward run in it)
    inputs: tuple | None = None  # forward's inputs as the C++ apply binds them

    @property
    def name(self) -> str:
        return self.cls.__name__  # as native names it (`{name}Backward`)


def _apply(cls, *args, **kwargs):
    """`_FunctionBase.apply` while levels are active (see the module docstring):
    `Function.apply` has bound setup_context's defaults and checked for functorch."""
    if (
        STATE.cap < 0  # no level handled: inside a forward, or level 0's rules
        or not torch._C._is_fwd_grad_enabled()
        or torch._C._are_functorch_transforms_active()
    ):
        return _native_apply(cls, *args, **kwargs)
    global _TRANSPARENT
    if _TRANSPARENT is None:
        _TRANSPARENT = _transparent()
    plain = _TRANSPARENT.get(cls)
    if plain is not None:
        # Even without input tangents: its function may read tensors with
        # tangents from its closure (a model's parameters), which native drops.
        return plain(*args, **kwargs)
    scan = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    level = _innermost_level(scan, STATE.cap)
    if level is None:
        # Like native: forward sees no tangent (closure tensors included).
        with handling_levels_below(STATE.levels[0], STATE.mode):
            return _native_apply(cls, *args, **kwargs)
    call = _Call(cls, args, kwargs, scan, torch.is_grad_enabled())
    outputs, _ = _apply_at(call, level)
    return outputs


def _innermost_level(tensors: list, top: int) -> Level | None:
    """The innermost level up to index `top` at which a tensor has a tangent."""
    for level in reversed(STATE.levels[: top + 1]):
        for t in tensors:
            if is_differentiable_dtype(t) and tangent_of(t, level) is not None:
                return level
    return None


def _apply_at(call: _Call, level: Level) -> tuple[Any, Any]:
    """Outputs with tangents at `level` and the lower levels; and the C++ ctx."""
    lower = _innermost_level(call.scan, level.index - 1)
    with handling_levels_below(level, STATE.mode):
        if lower is None:
            outputs, base_ctx = _run_primal(call)
            ctx = base_ctx
        else:
            outputs, base_ctx = _apply_at(call, lower)
            ctx = _ctx_for_outer_level(call, base_ctx, outputs)
        _differentiate(call, ctx, level, outputs)
    return outputs, base_ctx


def _run_primal(call: _Call) -> tuple[Any, Any]:
    """The native apply with no level handled (forward sees no tangent), catching
    the ctx it creates."""
    frame = [call.cls._backward_cls, None]
    _CAPTURE.pending.append(frame)
    try:
        with handling_levels_below(STATE.levels[0], STATE.mode):
            outputs = _native_apply(call.cls, *call.args, **call.kwargs)
    finally:
        _CAPTURE.pending.pop()
    ctx = frame[1]
    if ctx is None:
        raise RuntimeError(f"dualgen: no autograd context was created for {call.name}")
    call.inputs = _bound_inputs(call)
    if len(call.inputs) != len(_NEEDS_INPUT_GRAD.__get__(ctx)):
        raise RuntimeError(
            f"dualgen: could not match {call.name}'s inputs to forward's arguments"
        )
    return outputs, ctx


def _bound_inputs(call: _Call) -> tuple:
    """forward's inputs as the C++ apply passes them: positional arguments, then
    keyword arguments at their parameters' positions (after `setup_context`'s
    Function.apply has bound the defaults)."""
    cls, args, kwargs = call.cls, call.args, call.kwargs
    has_setup = _has_setup_context(cls)
    if has_setup:
        bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    if not kwargs:
        return tuple(args)
    names = list(inspect.signature(cls.forward).parameters)[0 if has_setup else 1 :]
    slots = list(args) + [None] * (len(names) - len(args))
    last = len(args) - 1
    for key, value in kwargs.items():
        position = names.index(key)
        slots[position] = value
        last = max(last, position)
    return tuple(slots[: last + 1])


def _has_setup_context(cls: type) -> bool:
    return cls.setup_context is not _SingleLevelFunction.setup_context


def _record(ctx) -> _Record:
    return ctx.__dict__.get(_RECORD) or _Record()


# --------------------------------------------------------------------------------------
# nested levels


def _ctx_for_outer_level(call: _Call, base_ctx, outputs):
    """The ctx for a level with tangents also below it. What jvp reads must carry
    the lower levels' tangents: with setup_context, it runs again (grad off, as
    native, lower levels handled) on the inputs and the outputs, which carry them.
    A forward(ctx, ...) cannot run again, so everything it left for jvp must be
    inputs or outputs (tensors computed inside forward carry no tangent)."""
    cls = call.cls
    if _has_setup_context(cls):
        ctx = cls._backward_cls()
        ctx.__dict__[_RECORD] = _Record()
        _NEEDS_INPUT_GRAD.__set__(ctx, _NEEDS_INPUT_GRAD.__get__(base_ctx))
        with torch.no_grad():
            cls.setup_context(ctx, call.inputs, outputs)
        return ctx
    record = _record(base_ctx)
    known = {id(t) for t in (*call.inputs, *_as_tuple(outputs))}
    left = [*(record.saved_for_forward or ()), *base_ctx.__dict__.values()]
    if not _has_jvp(cls):
        left.extend(record.to_save or ())
    for value in left:
        if (
            isinstance(value, torch.Tensor)
            and is_differentiable_dtype(value)  # (indices carry no tangent anyway)
            and id(value) not in known
        ):
            raise NotImplementedError(
                f"{call.name}: with nested dual levels, dualgen differentiates its "
                f"jvp at the outer levels, but forward(ctx, ...) left a tensor "
                f"computed inside forward on ctx, which carries no outer-level "
                f"tangent. Define setup_context (compute what jvp needs there from "
                f"inputs and output) instead of taking ctx in forward, as torch.func "
                f"requires."
            )
    return base_ctx


# --------------------------------------------------------------------------------------
# one level


def _differentiate(call: _Call, ctx, level: Level, outputs) -> None:
    """Output tangents at `level` from the rule, jvp or the derived jvp."""
    tangents = [
        (
            tangent_of(x, level)
            if isinstance(x, torch.Tensor) and is_differentiable_dtype(x)
            else None
        )
        for x in call.inputs
    ]
    versions = [t._version if t is not None else None for t in tangents]
    outs = _as_tuple(outputs)
    record = _record(ctx)
    rule = _RULES.get(call.cls)
    if rule is None and _has_jvp(call.cls):
        rule = call.cls.jvp
    if rule is not None:
        given = _materialized(call, ctx, tangents)
        results = _results(_call_with_saved(rule, ctx, record, given), len(outs))
        derived = False
    else:
        results = _derived_jvp(call, ctx, record, tangents, outs)
        derived = True
    for i, (out, value) in enumerate(zip(outs, results)):
        _attach(call, level, record, tangents, versions, i, out, value, derived)
    if call.grad_enabled and any(
        t.requires_grad for t in (*call.scan, *_tensors(tangents))
    ):
        remember_saved_outputs(level, outs)


def _materialized(call: _Call, ctx, tangents: list) -> list:
    """What native passes to jvp: zeros for a floating point or complex tensor
    input without tangent, unless `ctx.set_materialize_grads(False)` was called."""
    if not _materializes(ctx):
        return tangents
    return [
        (
            torch.zeros_like(x)
            if t is None and isinstance(x, torch.Tensor) and is_differentiable_dtype(x)
            else t
        )
        for x, t in zip(call.inputs, tangents)
    ]


def _has_jvp(cls: type) -> bool:
    return cls.jvp is not _SingleLevelFunction.jvp


def _as_tuple(outputs) -> tuple:
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _tensors(values) -> list:
    return [v for v in values if isinstance(v, torch.Tensor)]


def _call_with_saved(fn: Callable, ctx, record: _Record, tangents: list):
    """jvp(ctx, *tangents) with `ctx.saved_tensors` what save_for_forward got (as
    native: () if it was not called)."""
    saved = _RAW["saved_for_forward"]
    saved.__set__(ctx, record.saved_for_forward or ())
    try:
        return fn(ctx, *tangents)
    finally:
        saved.__set__(ctx, None)


def _results(value, expected: int) -> tuple:
    """jvp's return value as a tuple, checked as native checks it."""
    results = value if isinstance(value, tuple) else (value,)
    if len(results) != expected:
        raise RuntimeError(
            "Function's jvp returned an invalid number of forward gradients "
            f"(expected {expected} but got {len(results)})"
        )
    for i, r in enumerate(results):
        if r is not None and not isinstance(r, torch.Tensor):
            raise RuntimeError(
                f"expected Variable or None (got {type(r).__name__}) for grad output "
                f"{i}."
            )
    return results


def _root(t: torch.Tensor) -> torch.Tensor:
    return t if t._base is None else t._base


def _viewed_input(inputs: tuple, out: torch.Tensor) -> int | None:
    """The first input that a view output shares its base with (native matches
    forward-view bases the same way); None for an output that is no view."""
    if out._base is None:
        return None
    root = out._base
    for j, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and _root(x) is root:
            return j
    return None


def _marked_non_differentiable(out: torch.Tensor, nondiff, inputs: tuple) -> bool:
    """Whether forward gave `out` to mark_non_differentiable. An input returned
    as-is comes back from autograd as `input.view_as(input)` (or detached): it is
    matched to that input by its memory and geometry."""
    if not nondiff:
        return False
    if any(t is out for t in nondiff):
        return True
    if out.layout != torch.strided:
        return False
    for x in inputs:
        if (
            isinstance(x, torch.Tensor)
            and any(t is x for t in nondiff)
            and x.layout == torch.strided
            and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            and out.storage_offset() == x.storage_offset()
            and out.shape == x.shape
            and out.stride() == x.stride()
            and out.dtype == x.dtype
        ):
            return True
    return False


def _attach(
    call: _Call,
    level: Level,
    record: _Record,
    tangents: list,
    versions: list,
    i: int,
    out,
    value: torch.Tensor | None,
    derived: bool,
) -> None:
    """Give output `i` its tangent `value` at `level`, with native's checks for
    non-differentiable, in-place (mark_dirty) and view outputs."""
    if not isinstance(out, torch.Tensor):
        return  # native ignores a tangent for a non-tensor output
    nondiff = record.non_differentiable or ()
    if not is_differentiable_dtype(out) or _marked_non_differentiable(
        out, nondiff, call.inputs
    ):
        if value is not None:
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but  the "
                "corresponding forward output is not a differentiable Tensor.You "
                "should return None at that position instead."
            )
        # Native leaves it alone: a non-differentiable view of an input (or an
        # input returned as-is) still sees the input's tangent through its base.
        return
    inputs = call.inputs
    if any(out is t for t in record.dirty_tensors or ()):
        k = next((j for j, x in enumerate(inputs) if x is out), None)
        if k is None:
            raise RuntimeError(
                "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor "
                "is not an input, there is no need to pass it to mark_dirty()."
            )
        _attach_inplace(call, level, i, out, tangents[k], versions[k], value, derived)
        return
    k = _viewed_input(inputs, out)
    if k is not None:
        _attach_view(call, level, i, out, inputs[k], tangents[k], value, derived)
        return
    if value is None:
        if out._base is not None:
            set_tangent(out, level, None)
        return
    _check_tangent(call, i, out, value)
    # In the output's layout, as native's _set_fw_grad (a copy only where the
    # strides differ: a jvp returning its input's tangent shares it, as native).
    set_tangent(out, level, conform_layout(value, out))


def _attach_inplace(
    call: _Call, level: Level, i: int, out, tangent, version, value, derived: bool
) -> None:
    """An input modified in place: its tangent must be modified in place and
    returned as-is (native's checks); an input without one gets `value`."""
    if tangent is None:
        if value is not None:
            _check_tangent(call, i, out, value)
            set_new_tangent(out, level, value)
        return
    if derived:
        tangent.copy_(value if value is not None else torch.zeros_like(tangent))
        return
    if value is None or value._version == version:
        raise RuntimeError(
            "An inplace custom Function is not modifying the forward mode gradients "
            "inplace. If the forward is modifying an input inplace, then the jvp "
            "function must modify the corresponding gradient inplace."
        )
    if value is not tangent:
        raise RuntimeError(
            "An inplace custom Function is not returning the forward mode gradients "
            "as-is. If the forward is modifying an input inplace, then the jvp "
            "function must modify the gradient inplace and return it as-is."
        )


def _attach_view(
    call: _Call, level: Level, i: int, out, source, tangent, value, derived: bool
) -> None:
    """An output that is a view of an input (or the input as-is): its tangent must
    be a view of the input's tangent (native's checks). A derived jvp uses the same
    view of the input's tangent, as for any view."""
    if tangent is None:
        if value is not None:
            _check_tangent(call, i, out, value)
            set_new_tangent(out, level, value)
        else:
            set_tangent(out, level, None)
        return
    if derived:
        set_tangent(out, level, view_of_tangent(tangent, out, source))
        return
    if value is None or value._base is None:
        raise RuntimeError(
            "A custom Function's forward is returning a view (or an input as-is) but "
            "the jvp is not returning a view."
        )
    if tangent._base is not None:
        if value._base is not tangent._base:
            raise RuntimeError(
                "A custom Function is returning a view but the jvp is not returning a "
                "view of the same base as the given grad input."
            )
    elif value._base is not tangent:
        raise RuntimeError(
            "A custom Function is returning a view but the jvp is not returning a "
            "view of the given grad input."
        )
    _check_tangent(call, i, out, value)
    set_tangent(out, level, value)


def _check_tangent(call: _Call, i: int, out: torch.Tensor, value: torch.Tensor):
    if not is_differentiable_dtype(value):
        raise RuntimeError(
            f"{call.name}'s jvp returned a {value.dtype} tangent for output {i}: "
            "Expected both tensor and its forward grad to be floating point or complex"
        )
    if value.shape != out.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of "
            f"the original Tensor, this is not supported. Tensor is of size "
            f"{list(out.shape)} while the given forward gradient is of size "
            f"{list(value.shape)}."
        )


# --------------------------------------------------------------------------------------
# the jvp derived from backward


def _user_backward(cls: type) -> Callable | None:
    """backward, or vjp where that is the one overridden (as BackwardCFunction)."""
    if cls.vjp is not _SingleLevelFunction.vjp:
        return cls.vjp
    if cls.backward is not _SingleLevelFunction.backward:
        return cls.backward
    return None


# Every @once_differentiable wrapper runs this code (functools.wraps copies the
# name and qualname of the function it wraps, not its code).
_ONCE_DIFFERENTIABLE_CODE = once_differentiable(lambda ctx: None).__code__


def _how_to_fix(name: str) -> str:
    return (
        f"Define a jvp staticmethod on {name}, or register one with "
        f"@dualgen.register_jvp({name}) (def rule(ctx, *input_tangents) -> output "
        f"tangents)."
    )


def _derived_jvp(
    call: _Call, ctx, record: _Record, tangents: list, outs: tuple
) -> tuple:
    """J t for a Function without jvp, from its backward: backward(ctx, *v) is
    linear in v, so the gradient of <backward(ctx, *v), t> with respect to v is
    J t (complex too: autograd's conjugate convention makes it the JVP)."""
    name = call.name
    nondiff = record.non_differentiable or ()
    if not any(
        isinstance(o, torch.Tensor)
        and is_differentiable_dtype(o)
        and not _marked_non_differentiable(o, nondiff, call.inputs)
        for o in outs
    ):
        return (None,) * len(outs)  # no output has a tangent to derive
    backward = _user_backward(call.cls)
    if backward is None:
        raise NotImplementedError(
            f"{name} has neither a jvp nor a backward: dualgen cannot compute its "
            f"forward derivative. {_how_to_fix(name)}"
        )
    if getattr(backward, "__code__", None) is _ONCE_DIFFERENTIABLE_CODE:
        raise NotImplementedError(
            f"{name} has no jvp, and its backward is @once_differentiable, so dualgen "
            f"cannot derive one from it (that differentiates backward). "
            f"{_how_to_fix(name)}"
        )
    with torch.enable_grad():
        seeds = [_seed(o, nondiff, call.inputs) for o in outs]
        grads = _call_backward(call, ctx, record, backward, seeds, tangents)
        pairs = [(g, t) for g, t in zip(grads, tangents) if t is not None]
        for k, (g, _) in enumerate(pairs):
            if g is not None and not (isinstance(g, torch.Tensor) and g.requires_grad):
                raise RuntimeError(
                    f"{name} has no jvp, and dualgen cannot derive one from its "
                    f"backward: the gradient it returns for an input with a tangent "
                    f"does not depend differentiably on grad_outputs (computed under "
                    f"no_grad, detached, or outside PyTorch; return None for inputs "
                    f"without gradient). {_how_to_fix(name)}"
                )
        pairs = [(g, t) for g, t in pairs if g is not None]
        wanted = [s for s in seeds if isinstance(s, torch.Tensor) and s.requires_grad]
        if not pairs or not wanted:
            # backward gives no gradient to the inputs with tangents: J t = 0
            return tuple(_zeros_if_wanted(s) for s in seeds)
        try:
            found = torch.autograd.grad(
                [g for g, _ in pairs],
                wanted,
                grad_outputs=[t for _, t in pairs],
                create_graph=call.grad_enabled,
                allow_unused=True,
            )
        except RuntimeError as error:
            raise RuntimeError(
                f"{name} has no jvp, and dualgen could not derive one from its "
                f"backward ({error}). {_how_to_fix(name)}"
            ) from error
    if all(f is None for f in found):
        raise RuntimeError(
            f"{name} has no jvp, and dualgen cannot derive one from its backward: "
            f"its gradients do not depend on grad_outputs. {_how_to_fix(name)}"
        )
    # An output that no gradient reaches gets zeros, as a jvp given native's zero
    # tangents for the inputs without tangent returns.
    by_seed = dict(zip(map(id, wanted), found))
    return tuple(
        by_seed.get(id(s)) if by_seed.get(id(s)) is not None else _zeros_if_wanted(s)
        for s in seeds
    )


def _zeros_if_wanted(seed):
    """Zeros for a differentiable output's seed; None for the others."""
    if isinstance(seed, torch.Tensor) and seed.requires_grad:
        return torch.zeros_like(seed, requires_grad=False)
    return None


def _seed(out, nondiff: tuple, inputs: tuple):
    """The dummy grad_output of an output: zeros requiring grad where it is
    differentiable, plain zeros where not (native materializes those), None for a
    non-tensor output."""
    if not isinstance(out, torch.Tensor):
        return None
    seed = torch.zeros_like(out)
    if is_differentiable_dtype(out) and not _marked_non_differentiable(
        out, nondiff, inputs
    ):
        seed.requires_grad_()
    return seed


def _call_backward(
    call: _Call, ctx, record: _Record, backward, seeds: list, tangents: list
) -> tuple:
    """backward(ctx, *seeds), with `ctx.saved_tensors` what save_for_backward got
    and `ctx.needs_input_grad` true for the inputs that have tangents."""
    name = call.name
    needs = _NEEDS_INPUT_GRAD.__get__(ctx)
    wanted = tuple(bool(n) or t is not None for n, t in zip(needs, tangents))
    saved = _RAW["saved_for_forward"]
    # Copies: backward may write into its grads, which leaves may not.
    grad_args = [s.clone() if s is not None and s.requires_grad else s for s in seeds]
    _NEEDS_INPUT_GRAD.__set__(ctx, wanted)
    saved.__set__(ctx, record.to_save or ())
    if getattr(call.cls, "boxed_grads_call", False):
        grad_args = [list(grad_args)]  # as BackwardCFunction.apply calls it
    try:
        grads = backward(ctx, *grad_args)
    except Exception as error:
        raise RuntimeError(
            f"{name} has no jvp, and dualgen could not derive one from its backward, "
            f"which raised {type(error).__name__}: {error}. {_how_to_fix(name)}"
        ) from error
    finally:
        saved.__set__(ctx, None)
        _NEEDS_INPUT_GRAD.__set__(ctx, needs)
    grads = grads if isinstance(grads, tuple) else (grads,)
    n = len(tangents)
    if len(grads) < n or any(g is not None for g in grads[n:]):
        raise RuntimeError(
            f"function {name}Backward returned an incorrect number of gradients "
            f"(expected {n}, got {len(grads)}), so dualgen cannot derive a jvp for "
            f"{name} from it. {_how_to_fix(name)}"
        )
    return grads[:n]
