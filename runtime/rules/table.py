"""The op -> JVP rule table: generated kernels, and user rules registered on top.

`register_jvp(op)` registers a rule for any OpOverload (custom ops included); it is
checked when registered and takes precedence over a generated kernel.
`load_kernels(package)` adds a kernel package generated from a library's own spec
(custom ops, docs/custom_ops.md) beside the installed kernels: its kernels are
Python under either backend. `rule_for(op)` is what the dispatch mode asks.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import sys
from collections.abc import Callable

import torch

from .. import backend
from ..functions import custom_ops
from ..hot_path import state as hot_path
from .rule import Rule, is_tensor_like, output_names


def _generated_rule(op, info, cpp_kernels=None, spec="derivatives.yaml") -> Rule:
    """The rule of a generated kernel: its Python function, or with
    `cpp_kernels` (the extension) its C++ twin. `spec` names the spec it came
    from in messages."""
    names = output_names(op._schema)
    jvp = info.jvp
    if cpp_kernels is not None and info.cpp_kernel is not None:
        call = _cpp_call(cpp_kernels.call_jvp, info.cpp_kernel, len(names) == 1)
    else:

        def call(primals, tangents, outputs):
            return jvp(*primals, *tangents, *outputs)

    return Rule(
        op=op,
        kind=info.kind,
        differentiable_inputs=info.differentiable_inputs,
        differentiable_outputs=tuple(n in info.differentiable_outputs for n in names),
        needs_original_self=info.needs_original_self,
        uses_outputs=info.jvp_uses_outputs,
        call=call,
        origin=f"{spec} entry {info.derived_from or info.name}",
        element_wise_jvp=info.element_wise_jvp,
        argument_names=info.arguments,
    )


def _cpp_call(call_jvp, key: str, single: bool) -> Callable:
    """A C++ kernel called as its Python twin is (a single output's tangent is
    returned as it is, several as a tuple)."""
    if single:

        def call(primals, tangents, outputs):
            return call_jvp(key, primals, tangents, outputs)[0]

    else:

        def call(primals, tangents, outputs):
            return tuple(call_jvp(key, primals, tangents, outputs))

    return call


_USER_RULES: dict[torch._ops.OpOverload, Rule] = {}
_GENERATED: dict[torch._ops.OpOverload, Rule] | None = None


_KERNELS: dict | None = None  # the generated table in use, when not the installed one

# Packages added by `load_kernels`: package name -> (op -> KernelInfo), in the
# order loaded; and the table they make with the base one (None: to compute).
_LOADED: dict[str, dict] = {}
_MERGED: dict | None = None
_LOADS = 0  # changes of _LOADED so far: rules saved before one are stale


# torch's own custom ops with rules of dualgen's (specs/torch_custom_ops.yaml): the
# module that registers them -> the package of their kernels, loaded once that
# module has been imported (dualgen does not import it: about a second at startup).
_TORCH_CUSTOM_OPS = {"torch.nn.attention.varlen": "dualgen.generated.torch_custom_ops"}
_PENDING = dict(_TORCH_CUSTOM_OPS)


def _load_torch_custom_ops() -> bool:
    """Load the kernels of torch's custom ops whose module is imported by now;
    whether any were."""
    loaded = False
    for module, package in list(_PENDING.items()):
        if module in sys.modules:
            del _PENDING[module]
            load_kernels(package)
            loaded = True
    return loaded


def generated_kernels() -> dict:
    """op -> KernelInfo: the installed generated kernels, or those `using_kernels`
    put in place, with the packages `load_kernels` added (a loaded package's
    kernel replaces an installed one for the same op; a table under test wins
    over a loaded package)."""
    global _MERGED
    if _PENDING:
        _load_torch_custom_ops()
    if _KERNELS is not None:
        base = _KERNELS
    else:
        from dualgen.generated.registry import KERNELS as base
    if not _LOADED:
        return base
    if _MERGED is None:
        loaded = _loaded_kernels()
        _MERGED = {**loaded, **base} if _KERNELS is not None else {**base, **loaded}
    return _MERGED


def _loaded_kernels() -> dict:
    table: dict = {}
    for kernels in _LOADED.values():
        table.update(kernels)
    return table


def _loaded_rules() -> dict:
    """The loaded packages' rules: their Python kernels, under either backend."""
    rules = {}
    for package, kernels in _LOADED.items():
        for op, info in kernels.items():
            rules[op] = _generated_rule(op, info, None, spec=package)
    return rules


def load_kernels(package) -> tuple:
    """Add the kernels of a package that `dualgen generate` wrote from a library's
    own spec (`dualgen generate --spec mylib/derivatives.yaml --out
    mylib/_derivatives --import mylib.ops`), given as its module or its name
    ("mylib._derivatives"); return the ops it covers.

    Importing the package's registry imports the modules that register its custom
    ops. Its kernels apply beside the installed ones (replacing them for an op
    both cover); user rules from `register_jvp` still take precedence. They run in
    Python under either kernel backend (a library's package has no C++ twins), in
    forward mode and in the tape (its VJP kernels). Loading a package again
    changes nothing; `unload_kernels` removes it.
    """
    import dataclasses
    import importlib

    name = package if isinstance(package, str) else package.__name__
    if name not in _LOADED:
        registry = importlib.import_module(f"{name}.registry")
        kernels = {
            op: dataclasses.replace(info, cpp_kernel=None)
            for op, info in registry.KERNELS.items()
        }
        _LOADED[name] = kernels
        _forget_tables()
    return tuple(_LOADED[name])


def unload_kernels(package) -> None:
    """Remove a package `load_kernels` added (its ops' kernels, if any, are the
    installed ones again)."""
    name = package if isinstance(package, str) else package.__name__
    if _LOADED.pop(name, None) is not None:
        _forget_tables()


def loaded_packages() -> tuple[str, ...]:
    """The packages `load_kernels` added, in the order loaded (not dualgen's own
    for torch's custom ops)."""
    own = set(_TORCH_CUSTOM_OPS.values())
    return tuple(name for name in _LOADED if name not in own)


def _forget_tables() -> None:
    global _GENERATED, _MERGED, _LOADS
    _GENERATED = _MERGED = None
    _LOADS += 1
    hot_path.forget()


@contextlib.contextmanager
def using_kernels(kernels: dict):
    """Within: the runtime (forward mode and the tape) uses `kernels` (a generated
    registry's KERNELS, say from a spec under test) instead of the installed ones.
    User rules still take precedence."""
    global _KERNELS, _GENERATED, _MERGED
    saved, loads = (_KERNELS, _GENERATED), _LOADS
    _KERNELS, _GENERATED, _MERGED = kernels, None, None
    hot_path.forget()
    try:
        yield
    finally:
        _KERNELS, _GENERATED = saved
        if loads != _LOADS:  # a package was loaded or unloaded within
            _GENERATED = None
        _MERGED = None
        hot_path.forget()


def _generated() -> dict:
    global _GENERATED
    if _GENERATED is None:
        if _KERNELS is None:  # the installed kernels, which the extension holds
            chosen = backend.kernel_backend()
            if chosen not in _INSTALLED:
                from dualgen.generated.registry import KERNELS

                _INSTALLED[chosen] = _rules_of(KERNELS, chosen)
            _GENERATED = _INSTALLED[chosen]
            if _LOADED:
                _GENERATED = {**_GENERATED, **_loaded_rules()}
        else:
            _GENERATED = _rules_of(_KERNELS, "python")
            if _LOADED:
                _GENERATED = {**_loaded_rules(), **_GENERATED}
    return _GENERATED


# The installed kernels' rules, per backend: switching back and forth is cheap.
_INSTALLED: dict[str, dict] = {}


def _rules_of(kernels: dict, backend: str) -> dict:
    cpp_kernels = None
    if backend == "cpp":
        from .. import cpp

        cpp_kernels = cpp.extension()
    return {op: _generated_rule(op, info, cpp_kernels) for op, info in kernels.items()}


def use_backend_rules(name: str) -> None:
    """Take the generated rules of the kernel backend `name`, now in use."""
    global _GENERATED
    if _KERNELS is None:
        _GENERATED = None


backend.follow(use_backend_rules)


def under_test() -> bool:
    """Whether a kernel table other than the installed one is in use
    (`using_kernels`)."""
    return _KERNELS is not None


def has_user_rule(op: torch._ops.OpOverload) -> bool:
    """Whether `register_jvp` gave `op` a rule."""
    return op in _USER_RULES


def rule_for_tracing(op: torch._ops.OpOverload) -> Rule | None:
    """The rule a program transform traces (dualgen.fx): a user rule, or the
    generated kernel in Python whatever the backend, so that every aten call of
    its formula is a call the tracer sees as Python wrote it."""
    rule = _USER_RULES.get(op)
    if rule is not None:
        return rule
    info = generated_kernels().get(op)
    return None if info is None else _generated_rule(op, info)


def rule_for(op: torch._ops.OpOverload) -> Rule | None:
    rule = _USER_RULES.get(op)
    if rule is not None:
        return rule
    rule = _generated().get(op)
    if rule is None and _PENDING and _load_torch_custom_ops():
        rule = _generated().get(op)
    return rule


custom_ops.use_rule_lookup(rule_for)  # (a custom op's autograd Function's jvp)


def _as_overload(op) -> torch._ops.OpOverload:
    if isinstance(op, torch._ops.OpOverload):
        return op
    inner = getattr(op, "_opoverload", None)  # torch.library.custom_op objects
    if isinstance(inner, torch._ops.OpOverload):
        return inner
    if isinstance(op, torch._ops.OpOverloadPacket):
        overloads = op.overloads()
        if overloads == ["default"]:
            return op.default
        raise TypeError(
            f"register_jvp needs one overload; {op._qualified_op_name} has "
            f"{', '.join(overloads)}: pass e.g. {op._qualified_op_name.replace('::', '.')}.{overloads[0]}"
        )
    raise TypeError(
        f"register_jvp expects an operator overload (torch.ops.ns.op.overload), got {op!r}"
    )


def _allowed_parameters(schema: torch.FunctionSchema) -> dict[str, str]:
    allowed = {}
    for arg in schema.arguments:
        if is_tensor_like(arg):
            allowed[f"{arg.name}_p"] = "primal"
            allowed[f"{arg.name}_t"] = "tangent"
        else:
            allowed[arg.name] = "argument"
    for name in output_names(schema):
        allowed[name] = "output"
    return allowed


def _user_rule(op: torch._ops.OpOverload, fn: Callable) -> Rule:
    schema = op._schema
    allowed = _allowed_parameters(schema)
    params = inspect.signature(fn).parameters
    for p in params.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(
                f"JVP rule for {op}: name its parameters; *args and **kwargs are not accepted"
            )
        if p.name not in allowed:
            close = difflib.get_close_matches(p.name, allowed, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TypeError(
                f"JVP rule for {op}: parameter '{p.name}' is not in the schema "
                f"({', '.join(allowed)}){hint}"
            )
    wanted = tuple(params)
    tangent_params = [n for n in wanted if allowed[n] == "tangent"]
    if not tangent_params:
        raise TypeError(f"JVP rule for {op}: it takes no tangent (<input>_t) parameter")
    arg_names = [a.name for a in schema.arguments]
    tensor_like = [is_tensor_like(a) for a in schema.arguments]
    diff_inputs = tuple(n for n in arg_names if f"{n}_t" in wanted)
    outs = output_names(schema)

    def call(primals, tangents, outputs):
        values = {}
        for name, is_tensor, value in zip(arg_names, tensor_like, primals):
            values[f"{name}_p" if is_tensor else name] = value
        values.update((f"{n}_t", t) for n, t in zip(diff_inputs, tangents))
        values.update(zip(outs, outputs))
        return fn(**{n: values[n] for n in wanted})

    is_float = tuple(str(r.type) in ("Tensor", "List[Tensor]") for r in schema.returns)
    return Rule(
        op=op,
        kind="user",
        differentiable_inputs=diff_inputs,
        differentiable_outputs=is_float,
        needs_original_self=False,
        uses_outputs=any(n in outs for n in wanted),
        call=call,
        origin=f"register_jvp({getattr(fn, '__qualname__', fn)})",
    )


def register_jvp(op) -> Callable[[Callable], Callable]:
    """Register a JVP rule for an operator, or for a custom autograd.Function
    (decorator; for a Function, see `dualgen.functions.register_function_jvp`).

    The rule's parameters are named as in the spec's forward formulas: `<arg>_p` for
    a tensor argument's primal, `<arg>_t` for its tangent (None when absent), plain
    names for other arguments, and `result` (or the output names) for the outputs. It
    returns the output tangent, a tuple for several outputs. Registering again for
    the same op replaces the earlier rule; user rules take precedence over generated
    kernels.

        @dualgen.register_jvp(torch.ops.mylib.mysin.default)
        def mysin_jvp(x_p, x_t):
            return x_t * x_p.cos()
    """
    if isinstance(op, type) and issubclass(op, torch.autograd.Function):
        from ..functions import register_function_jvp

        return register_function_jvp(op)
    overload = _as_overload(op)

    def decorate(fn: Callable) -> Callable:
        _USER_RULES[overload] = _user_rule(overload, fn)
        hot_path.forget()
        return fn

    return decorate


def unregister_jvp(op) -> None:
    """Remove a user rule (the generated kernel, if any, applies again)."""
    if isinstance(op, type) and issubclass(op, torch.autograd.Function):
        from ..functions import unregister_function_jvp

        unregister_function_jvp(op)
        return
    _USER_RULES.pop(_as_overload(op), None)
    hot_path.forget()
