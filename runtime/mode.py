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
    _disable_current_modes,
    _get_current_dispatch_mode,
    _pop_mode,
    _push_mode,
)

from .levels import (
    MISSING,
    STATE,
    Level,
    copy_entries,
    forward_base,
    note_view,
    own_tangent,
    set_tangent,
    view_of_tangent,
    with_lazy_bits,
)
from .rules import Rule, generated_kernels, rule_for


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
    base = forward_base(t)
    if base is not None:
        base_tangent = tangent_of(base, level)
        if base_tangent is None:
            return None
        with handling_levels_below(level, STATE.mode), autograd_enabled():
            derived = view_of_tangent(base_tangent, t, base)
        set_tangent(t, level, derived)
        return derived
    # Efficient zero tensors (autograd's zeros, e.g. the gradient of sgn) have no
    # memory, so no saved output can be one. A rebuilt saved output keeps its
    # place in the graph (requires_grad); `.data` and from_dlpack copies do not.
    if level.saved and t.requires_grad and not t._is_zerotensor():
        saved = level.saved.get(geometry(t))
        if saved is not None:
            value = saved[1].get(level)
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


def remember_saved_outputs(level: Level, outputs) -> None:
    """Let tangents of outputs be found again after autograd saved and rebuilt them
    (backward formulas that read the output: tanh, sigmoid, relu, softmax, ...)."""
    from .levels import TANGENTS

    for o in _tensors(outputs):
        entries = o.__dict__.get(TANGENTS)
        if entries and level in entries and not o._is_zerotensor():
            # Holding the output keeps its memory from being reused by another
            # tensor of the same geometry while the level lasts.
            level.saved[geometry(o)] = (o, entries)


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
        if reads_lazy_views(args, kwargs):
            with native_dispatch_keys():
                return self._dispatch(func, args, kwargs)
        return self._dispatch(func, args, kwargs)

    def _dispatch(self, func, args, kwargs):
        level = innermost_level_with_tangent(args, kwargs)
        if level is None:
            out = func(*args, **kwargs)
        else:
            out = _dispatch_at(self, func, args, kwargs, level)
        if func.is_view and func is not _DETACH:
            _note_views(out, args)
        return out


_DETACH = torch.ops.aten.detach.default  # a view whose tangent is never derived

# In-place ops whose native formula, for a self without a tangent, is an
# operand's tangent alone (copy_: `src_t`), not a promotion with self's
# zero-filled one: self gets that tangent in the operand's dtype.
_WRITES_OPERAND_AS_IS = frozenset({torch.ops.aten.copy_.default})


def _note_views(out, args) -> None:
    """Views of a tensor with tangents of its own follow that tensor's tangent,
    not their memory's owner's (`levels.forward_base`)."""
    source = args[0] if args else None
    if isinstance(source, torch.Tensor):
        for o in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
            note_view(o, source)


_LAZY_VIEW_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Conjugate) | (
    torch._C.DispatchKeySet(torch._C.DispatchKey.Negative)
)


def reads_lazy_views(args, kwargs) -> bool:
    """True if an argument is complex or a lazily negated view (`x.conj().imag`):
    only then can the Conjugate and Negative keys matter (`native_dispatch_keys`),
    so real-only ops skip the guard's cost."""
    for t in _tensors(args):
        if t.is_complex() or t.is_neg():
            return True
    return bool(kwargs) and any(
        t.is_complex() or t.is_neg() for t in _tensors(kwargs.values())
    )


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
    twin = _ATEN_TWIN_OF_PRIM.get(func)
    if twin is not None:
        # Autograd adds a gradient to an efficient zero tensor through
        # torch._refs.add, which reaches prims: run the prim as its aten twin.
        return _dispatch_at(mode, twin, args, kwargs, level)
    if has_decomposition(func):
        # A composite op reached us below its usual decomposition (autograd's
        # zero tensors call `to` directly): run its aten ops through the mode.
        with mode:
            # The C++ kernel: a Python one (torch._refs) would reach prims.
            return func._op_dk(
                torch._C.DispatchKey.CompositeImplicitAutograd, *args, **kwargs
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


# Element-wise prims with an aten op of the same arguments and values (torch._refs
# has promoted their dtypes and broadcast their shapes already).
_ATEN_TWIN_OF_PRIM = {
    torch.ops.prims.add.default: torch.ops.aten.add.Tensor,
    torch.ops.prims.sub.default: torch.ops.aten.sub.Tensor,
    torch.ops.prims.mul.default: torch.ops.aten.mul.Tensor,
    torch.ops.prims.neg.default: torch.ops.aten.neg.default,
}


def has_decomposition(func) -> bool:
    """True for ops torch implements in other aten ops (CompositeImplicitAutograd)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    )


def bind(schema, args, kwargs) -> list:
    """The op's arguments in schema order, defaults filled in."""
    values = []
    n = len(args)
    for i, (name, kwarg_only, default) in enumerate(_signature(schema)):
        if i < n and not kwarg_only:
            values.append(args[i])
        elif name in kwargs:
            values.append(kwargs[name])
        else:
            values.append(default)
    return values


_SIGNATURES: dict = {}


def _signature(schema) -> tuple:
    """(name, kwarg_only, default) per argument, cached: reading
    `schema.arguments` builds new objects on every access, and bind runs on
    every op."""
    key = id(schema)
    cached = _SIGNATURES.get(key)
    if cached is None or cached[0] is not schema:
        signature = tuple(
            (a.name, a.kwarg_only, a.default_value if a.has_default_value() else None)
            for a in schema.arguments
        )
        cached = _SIGNATURES[key] = (schema, signature)
    return cached[1]


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
    tracking = _tracking(primals, tangents)
    promote = _tangents_have_primal_dtypes(primals, tangents, rule.input_indices)
    inplace = rule.kind == "inplace"
    self_tangent = tangents[0] if inplace and rule.input_indices[:1] == (0,) else None
    with handling_levels_below(level, mode):
        target = primals[0] if inplace else None
        if inplace:
            _separate_from_self(primals, tangents, rule.input_indices, self_tangent)
        if inplace and rule.needs_original_self:
            with autograd_enabled():
                primals[0] = primals[0].clone()
        if (
            self_tangent is not None
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
        if rule.uses_outputs and tracking:
            # Reverse-over-forward needs the outputs the formula reads inside the
            # graph: the op runs once, under autograd (never twice: side effects
            # such as running statistics and random draws happen once).
            if inplace:
                out, kernel_outputs = _run_inplace_tracked(
                    func, target, primals, rule.needs_original_self
                )
            else:
                out, kernel_outputs = _run_tracked(func, args, kwargs, many)
        else:
            out = func(*args, **kwargs)
            kernel_outputs = tuple(out) if many else (out,)
        outputs = tuple(out) if many else (out,)
        with autograd_enabled():
            result = rule.call(primals, tangents, kernel_outputs)
        results = result if many else (result,)
        if not promote:
            results = _in_native_dtypes(
                rule, primals, tangents, kernel_outputs, results
            )
        with autograd_enabled():
            if inplace:
                promote = promote and func not in _WRITES_OPERAND_AS_IS
                _update_self(
                    level, outputs[0], self_tangent, results[0], promote, tangents
                )
                if self_tangent is not None and _has_shared_elements(self_tangent):
                    written = _written(rule, primals, tangents, kernel_outputs)
                    _write_shared(self_tangent, results[0], written)
            else:
                shared = None
                if rule.kind != "view":
                    shared = _shared_with_inputs(results, tangents)
                _attach(rule, level, outputs, results, promote, shared)
    if tracking:
        remember_saved_outputs(level, outputs)
    return out


def _separate_from_self(primals: list, tangents: list, indices, self_tangent) -> None:
    """An in-place op's formula reads its other operands as they were before the
    update: any that shares memory with self (`x.mul_(x)`, `x[i] = x[j]` through
    a view) is read from a copy, and so is a tangent sharing memory with self's
    tangent, which the update writes into. Storage identity only: free unless
    operands overlap, and nothing to look up without tensor operands."""
    target = primals[0]
    if not isinstance(target, torch.Tensor):
        return
    memory = None
    for i in range(1, len(primals)):
        value = primals[i]
        if isinstance(value, torch.Tensor):
            if memory is None:
                memory = _storage_key(target)
            if _storage_key(value) == memory:
                with autograd_enabled():
                    primals[i] = value.clone()
    if self_tangent is None or len(tangents) < 2:
        return
    tangent_memory = _storage_key(self_tangent)
    for j, (i, t) in enumerate(zip(indices, tangents)):
        shares = i != 0 and isinstance(t, torch.Tensor)
        if shares and _storage_key(t) == tangent_memory:
            with autograd_enabled():
                tangents[j] = t.clone()


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _run_tracked(func, args, kwargs, many: bool):
    """Run a functional op once with autograd recording. Returns what the mode
    hands back (each output as a detached alias: the autograd layer above records
    its own node on it) and the recorded outputs the formula reads."""
    with autograd_enabled():
        tracked = func(*args, **kwargs)
    outputs = tuple(tracked) if many else (tracked,)
    plain = tuple(_detached_alias(o) for o in outputs)
    return (plain if many else plain[0]), outputs


def _run_inplace_tracked(func, target, primals: list, have_original: bool):
    """An in-place op whose formula reads its result, with autograd recording:
    its functional form runs once on self's old value, inside the graph, and the
    result is written into self. Returns self and the recorded result."""
    with autograd_enabled():
        before = primals[0] if have_original else target.clone()
        tracked = call_with(functional_form(func), [before, *primals[1:]])
    target.copy_(tracked)  # below autograd: recorded by the layer above
    return target, (tracked,)


def _detached_alias(value):
    """`value` without autograd history, sharing its memory, version counter and
    tangents (the tangents of the levels below the one being handled)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_detached_alias(v) for v in value)
    if not isinstance(value, torch.Tensor) or not value.requires_grad:
        return value
    if type(value) is torch.Tensor:
        # The mode must not see this detach (it would derive a view's tangent);
        # excluding the Python key is the cheap way when no subclass needs it.
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
            alias = value.detach()
    else:
        with _disable_current_modes():
            alias = value.detach()
    copy_entries(value, alias)
    return alias


_PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | (
    torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot)
)


def call_with(func, values: list):
    """Call an op with its arguments in schema order (keyword-only ones by name)."""
    args, kwargs = [], {}
    for arg, value in zip(func._schema.arguments, values):
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return func(*args, **kwargs)


def functional_form(func):
    """The functional op an in-place op's formulas come from (`aten.exp.default`
    for `aten.exp_.default`, `aten.pow.Tensor_Tensor` for `aten.pow_.Tensor`):
    the spec's entry where it names one, else the same name without `_`."""
    info = generated_kernels().get(func)
    if info is not None and info.derived_from:
        name, _, overload = info.derived_from.partition(".")
        return getattr(getattr(torch.ops.aten, name), overload or "default")
    schema = func._schema
    packet = getattr(torch.ops.aten, schema.name.split("::")[-1].rstrip("_"))
    return getattr(packet, schema.overload_name or "default")


def _tracking(primals, tangents) -> bool:
    if not torch.is_grad_enabled():
        return False
    for v in list(_tensors(primals)) + list(
        _tensors(t for t in tangents if t is not None)
    ):
        if v.requires_grad:
            return True
    return False


def _shared_with_inputs(results, tangents) -> tuple[bool, ...] | None:
    """Which output tangents of a non-view op alias an input's tangent (a formula
    that reduced to `self_t`, or `conform(self_t)`, once its other terms were
    dropped): they are stored as copies, laid out as native lays out the tangent
    it is given (`conform_layout(..., fresh=True)`); otherwise an in-place op on
    the output, or on the input, would also write into the other's tangent.
    Native gives such outputs fresh tangents too. None: no input has a tangent
    tensor. Identity and `_base` checks only: this runs on every op."""
    roots = {
        id(t if t._base is None else t._base)
        for t in tangents
        if isinstance(t, torch.Tensor)
    }
    if not roots:
        return None
    return tuple(
        isinstance(v, torch.Tensor) and id(v if v._base is None else v._base) in roots
        for v in results
    )


def _update_self(
    level: Level, self_value, self_tangent, new, promote, tangents
) -> None:
    """An in-place op's tangent: written into self's tangent, or given to self.
    (A tangent whose elements share memory is written by `_write_shared`.)"""
    if self_tangent is not None:
        if new is not self_tangent and not _has_shared_elements(self_tangent):
            self_tangent.copy_(
                new if new is not None else torch.zeros_like(self_tangent)
            )
    elif new is not None:
        if promote:
            new = _promoted_for_self(new, self_value, tangents)
        elif self_value.is_complex() and not new.is_complex():
            # A complex tensor gets a complex tangent (native keeps copy_'s real
            # one, and then cannot take the tensor's .real or .imag).
            with autograd_enabled():
                new = new.to(self_value.dtype)
        # A formula that reduced to an operand's tangent (copy_: `src_t`) must
        # not make self share that operand's tangent.
        fresh = (_shared_with_inputs((new,), tangents) or (False,))[0]
        set_new_tangent(self_value, level, new, fresh)


def _has_shared_elements(t: torch.Tensor) -> bool:
    """Whether elements of t share memory (a stride-0 dimension of size > 1)."""
    return any(n > 1 and not s for n, s in zip(t.shape, t.stride()))


def _written(rule: Rule, primals, tangents, outputs) -> torch.Tensor:
    """Where an in-place op writes self (fill_, masked_fill_ and index_put_ may
    write memory whose elements alias): the positions its formula does not take
    from self's tangent, found by running it once more with self's tangent NaN."""
    like = tangents[0]
    sentinel = torch.full(
        like.shape, float("nan"), dtype=like.dtype, device=like.device
    )
    probe = rule.call(primals, [sentinel, *tangents[1:]], outputs)
    if probe is None:
        return torch.ones(like.shape, dtype=torch.bool, device=like.device)
    return ~probe.isnan()


def _write_shared(target: torch.Tensor, value, written: torch.Tensor) -> None:
    """Write an in-place op's new tangent into a tangent whose elements share
    memory: each location once, from the first of its elements the op writes
    (so a location keeps a write made through any of its aliases), or as it is
    where the op writes none."""
    if value is None:
        value = torch.zeros(target.shape, dtype=target.dtype)
    merged = torch.where(written, value.to(target.dtype), target)
    for d, (n, stride) in enumerate(zip(target.shape, target.stride())):
        if n > 1 and not stride:
            first = written.to(torch.int8).argmax(d, keepdim=True)
            merged, written = merged.gather(d, first), written.gather(d, first)
            target = target.narrow(d, 0, 1)
    target.copy_(merged)


def _attach(rule: Rule, level: Level, outputs, results, promote, shared) -> None:
    """Give each output its tangent (`shared[i]`: result i is an input's tangent,
    stored as a copy)."""
    for i, (output, value, differentiable) in enumerate(
        zip(outputs, results, rule.differentiable_outputs)
    ):
        if isinstance(output, (list, tuple)):
            for o, v in zip(output, value or [None] * len(output)):
                _attach_one(rule, level, o, v if differentiable else None, promote)
        else:
            fresh = shared is not None and shared[i]
            value = value if differentiable else None
            _attach_one(rule, level, output, value, promote, fresh)


def _attach_one(
    rule: Rule, level: Level, output, value, promote, fresh: bool = False
) -> None:
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
        if promote:
            value = _in_dtype_of(value, output)
        value = conform_layout(value, output, fresh)
    set_tangent(output, level, value)


def _tangents_have_primal_dtypes(primals, tangents, indices) -> bool:
    for i, tangent in zip(indices, tangents):
        pairs = (
            zip(primals[i], tangent)
            if isinstance(tangent, list)
            else [(primals[i], tangent)]
        )
        for p, t in pairs:
            if t is not None and isinstance(p, torch.Tensor) and t.dtype != p.dtype:
                return False
    return True


def _as_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(
            value.size(), value.stride(), dtype=value.dtype, device="meta"
        )
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value


def _zero_filled(tangent, primal):
    """A meta stand-in for each absent tangent: a zero of its primal's dtype."""
    if isinstance(tangent, list) or isinstance(primal, (list, tuple)):
        tangents = tangent or [None] * len(primal)
        return [_zero_filled(t, p) for t, p in zip(tangents, primal)]
    if tangent is None and isinstance(primal, torch.Tensor):
        return _as_meta(primal) if is_differentiable_dtype(primal) else None
    if tangent is None and type(primal) in (int, float, complex):
        # A number where the schema has a tensor: native wraps it, and its zero
        # tangent promotes as a number does (`x + 0.5` keeps x's tangent dtype,
        # `x * 0.5` gets x's dtype from `other_t * self_p`).
        return type(primal)(0)
    return _as_meta(tangent)


def _in_native_dtypes(rule: Rule, primals, tangents, outputs, results):
    """Where a tangent has another dtype than its primal, the dtypes native's
    tangents get: native evaluates a formula's every term, with zeros of the
    primals' dtypes for absent tangents, so `x * 0.5` with a float32 tangent of a
    float64 x is float64 (from `other_t * self_p`), where dualgen drops that
    term. The formula run on meta tensors tells; one meta cannot run keeps the
    dtypes it has."""
    try:
        filled = [
            _zero_filled(t, primals[i]) for i, t in zip(rule.input_indices, tangents)
        ]
        meta = rule.call([_as_meta(p) for p in primals], filled, _as_meta(outputs))
    except Exception:  # noqa: BLE001 - a formula meta tensors cannot run
        return results
    metas = meta if len(results) > 1 else (meta,)
    out = []
    for value, like in zip(results, metas):
        if (
            isinstance(value, torch.Tensor)
            and isinstance(like, torch.Tensor)
            and value.dtype != like.dtype
        ):
            with autograd_enabled():
                value = value.to(like.dtype)
        out.append(value)
    return tuple(out)


def _in_dtype_of(tangent: torch.Tensor, primal: torch.Tensor) -> torch.Tensor:
    """The output tangent in its primal's dtype, when every input tangent has its
    primal's dtype. Native forward AD evaluates formulas with zeros of the
    primals' dtypes for absent tangents, so its tangents promote like the primals
    do; dualgen drops those terms (a float64 0-d tangent times float32 values
    would stay float32). Tangents made with another dtype on purpose keep it."""
    if tangent.dtype == primal.dtype or (
        tangent.is_complex() and not primal.is_complex()
    ):
        return tangent
    with autograd_enabled():
        return tangent.to(primal.dtype)


def _promoted_for_self(new: torch.Tensor, self_value: torch.Tensor, tangents):
    """The tangent an in-place op gives a tensor that had none, in the dtype
    native's formula gives it: the promotion of a zero tangent of self's dtype
    with the operands' tangents (so a float32 tensor updated from a float64 dual
    gets a float64 tangent, and from a 0-d float64 dual a float32 one)."""
    dtype = self_value.dtype
    for t in _tensors(tangents):
        if t.dtype != dtype:
            dtype = torch.result_type(
                torch.empty(self_value.shape, dtype=dtype, device="meta"),
                torch.empty(t.shape, dtype=t.dtype, device="meta"),
            )
    if not self_value.is_complex():
        # as writing complex values into real memory does
        new = new.real if new.is_complex() else new
        dtype = dtype.to_real() if dtype.is_complex else dtype
    if new.dtype == dtype or (new.is_complex() and not dtype.is_complex):
        return new
    with autograd_enabled():
        return new.to(dtype)


def same_layout(tangent: torch.Tensor, primal: torch.Tensor) -> bool:
    """Native's test (`has_same_meta`) for keeping a tangent as it is: the same
    storage length, lazy bits and sizes, and, unless there are no elements, the
    same storage offset and strides (a dimension of size 1 has no stride that
    matters). Cheapest checks first: this runs on every output."""
    if (
        tangent.shape != primal.shape
        or tangent.is_conj() != primal.is_conj()
        or tangent.is_neg() != primal.is_neg()
    ):
        return False
    if primal.numel() != 0:
        if tangent.storage_offset() != primal.storage_offset():
            return False
        strides, primal_strides = tangent.stride(), primal.stride()
        if strides != primal_strides and not all(
            a == b or n == 1 for a, b, n in zip(strides, primal_strides, primal.shape)
        ):
            return False
    return _storage_length(tangent) == _storage_length(primal)


def conform_layout(
    tangent: torch.Tensor, primal: torch.Tensor, fresh: bool = False
) -> torch.Tensor:
    """The tangent as native forward AD stores it: kept as it is when it has the
    primal's layout (`same_layout`); otherwise copied into a new tensor of the
    primal's dtype, layout and bits (views of it then match views of the
    primal). `fresh`: the tangent is another tensor's, so one that would be kept
    is copied into new memory of the same layout and dtype instead."""
    keep = same_layout(tangent, primal)
    if keep and not fresh:
        return tangent
    dtype = tangent.dtype if keep else primal.dtype
    with autograd_enabled():  # from make_dual; a no-op inside the mode
        return laid_out_like(primal, dtype, zeros=False).copy_(tangent)


def laid_out_like(primal: torch.Tensor, dtype: torch.dtype, zeros: bool = True):
    """New memory of `dtype` laid out like `primal` (sizes, strides, offset,
    storage length, lazy bits); zeros, or (`zeros=False`) unset where the primal
    covers its storage. Zeros are not written through the layout: an expanded
    primal's memory has elements that share a location."""
    offset = primal.storage_offset()
    length = _storage_length(primal)
    if zeros or offset or length != primal.numel():
        # A view into a larger storage: the tangent gets storage of the same
        # size, zeros outside the view, so as_strided reaches the same places.
        storage = torch.zeros(length, dtype=dtype, device=primal.device)
        laid_out = storage.as_strided(primal.size(), primal.stride(), offset)
    else:
        laid_out = torch.empty_strided(
            primal.size(), primal.stride(), dtype=dtype, device=primal.device
        )
    return with_lazy_bits(laid_out, primal)


def _storage_length(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def set_new_tangent(
    t: torch.Tensor, level: Level, value: torch.Tensor, fresh: bool = False
) -> None:
    """Give `t`, which had no tangent at `level`, the tangent `value` (`fresh`: a
    copy of it, value being another tensor's tangent). If t is a view, the
    tangent lives on its base (zeros elsewhere), so the base and its other views
    see it."""
    base = forward_base(t)
    if base is None or own_tangent(t, level) is None:
        set_tangent(t, level, conform_layout(value, t, fresh))
        return
    base_tangent = tangent_of(base, level)
    if (
        base_tangent is None
        and value.is_complex() == base.is_complex()
        and same_layout(value, base)
        and same_layout(value, t)
    ):
        # As native: a tangent laid out like both becomes the base's as it is
        # (in its own dtype), and the view's is the same tensor. (Not a real one
        # for a complex base, which only an empty `.real` view lays out alike:
        # the base's complex views could not be taken of it.)
        value = conform_layout(value, t, fresh)
        set_tangent(base, level, value)
        set_tangent(t, level, value)
        return
    with autograd_enabled():
        if base_tangent is None:
            base_tangent = laid_out_like(base, base.dtype)
            set_tangent(base, level, base_tangent)
        view_tangent = view_of_tangent(base_tangent, t, base)
        view_tangent.copy_(value)
    set_tangent(t, level, view_tangent)
