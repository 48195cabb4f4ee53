"""The op -> JVP rule table: generated kernels, and user rules registered on top.

`register_jvp(op)` registers a rule for any OpOverload (custom ops included); it is
checked when registered and takes precedence over a generated kernel. `rule_for(op)`
is what the dispatch mode asks.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import fast

_TENSOR_TYPES = ("Tensor", "Optional[Tensor]", "List[Tensor]", "List[Optional[Tensor]]")


def _is_tensor_like(arg: torch.Argument) -> bool:
    return str(arg.type) in _TENSOR_TYPES


def output_names(schema: torch.FunctionSchema) -> tuple[str, ...]:
    returns = schema.returns
    if len(returns) == 1:
        return ("result",)
    return tuple(r.name or f"result{i}" for i, r in enumerate(returns))


@dataclass(frozen=True)
class Rule:
    """How the mode calls one op's JVP: `call(primals, tangents, outputs)`.

    `primals` are all arguments in schema order, `tangents` those of
    `differentiable_inputs` (None where absent), `outputs` the op's outputs.
    """

    op: torch._ops.OpOverload
    kind: str  # "functional", "inplace", "view", "user"
    differentiable_inputs: tuple[str, ...]
    differentiable_outputs: tuple[bool, ...]  # per schema output
    needs_original_self: bool
    uses_outputs: bool
    call: Callable
    origin: str  # where the rule was written, for messages

    @property
    def input_indices(self) -> tuple[int, ...]:
        """Positions of the differentiable inputs among the schema's arguments."""
        cached = self.__dict__.get("_input_indices")
        if cached is None:
            names = [a.name for a in self.op._schema.arguments]
            cached = tuple(names.index(n) for n in self.differentiable_inputs)
            object.__setattr__(self, "_input_indices", cached)
        return cached


def _generated_rule(op, info, cpp_kernels=None) -> Rule:
    """The rule of a generated kernel: its Python function, or with
    `cpp_kernels` (the extension) its C++ twin."""
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
        origin=f"derivatives.yaml entry {info.derived_from or info.name}",
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


def generated_kernels() -> dict:
    """op -> KernelInfo: the installed generated kernels, or those `using_kernels`
    put in place."""
    if _KERNELS is not None:
        return _KERNELS
    from dualgen.generated.registry import KERNELS

    return KERNELS


@contextlib.contextmanager
def using_kernels(kernels: dict):
    """Within: the runtime (forward mode and the tape) uses `kernels` (a generated
    registry's KERNELS, say from a spec under test) instead of the installed ones.
    User rules still take precedence."""
    global _KERNELS, _GENERATED
    saved = _KERNELS, _GENERATED
    _KERNELS, _GENERATED = kernels, None
    fast.forget()
    try:
        yield
    finally:
        _KERNELS, _GENERATED = saved
        fast.forget()


def _generated() -> dict:
    global _GENERATED
    if _GENERATED is None:
        if _KERNELS is None:  # the installed kernels, which the extension holds
            from .backend import kernel_backend

            backend = kernel_backend()
            if backend not in _INSTALLED:
                _INSTALLED[backend] = _rules_of(generated_kernels(), backend)
            _GENERATED = _INSTALLED[backend]
        else:
            _GENERATED = _rules_of(_KERNELS, "python")
    return _GENERATED


# The installed kernels' rules, per backend: switching back and forth is cheap.
_INSTALLED: dict[str, dict] = {}


def _rules_of(kernels: dict, backend: str) -> dict:
    cpp_kernels = None
    if backend == "cpp":
        from . import cpp

        cpp_kernels = cpp.extension()
    return {op: _generated_rule(op, info, cpp_kernels) for op, info in kernels.items()}


def use_backend_rules() -> None:
    """Take the generated rules of the kernel backend now in use (it changed)."""
    global _GENERATED
    if _KERNELS is None:
        _GENERATED = None


def rule_for(op: torch._ops.OpOverload) -> Rule | None:
    rule = _USER_RULES.get(op)
    if rule is not None:
        return rule
    return _generated().get(op)


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
        if _is_tensor_like(arg):
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
    tensor_like = [_is_tensor_like(a) for a in schema.arguments]
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
        from .functions import register_function_jvp

        return register_function_jvp(op)
    overload = _as_overload(op)

    def decorate(fn: Callable) -> Callable:
        _USER_RULES[overload] = _user_rule(overload, fn)
        fast.forget()
        return fn

    return decorate


def unregister_jvp(op) -> None:
    """Remove a user rule (the generated kernel, if any, applies again)."""
    if isinstance(op, type) and issubclass(op, torch.autograd.Function):
        from .functions import unregister_function_jvp

        unregister_function_jvp(op)
        return
    _USER_RULES.pop(_as_overload(op), None)
    fast.forget()
