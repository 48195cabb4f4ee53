"""The shape of each call in a formula: positional count and keyword names.

One job: given the callee a formula calls (resolved by `formula`) and its
`ast.Call`, say what is wrong with the call's shape, or None. Formulas take no
`*args`/`**kwargs` (`formula` refuses them), so counts are static.

- `torch.ops.aten.X(...)` is matched against every schema of `aten::X` (the
  packet picks one at run time: at least one must take the call's shape);
  `torch.ops.aten.X.ov(...)` against that overload's schema.
- A `torch.*` function or a Tensor method that is a C binding of its namesake
  aten operator (as `admissible` resolves it) is matched against that
  operator's dispatcher schemas, read the way Python's argument parser reads
  them: a function's `self` is also `input`, numpy's names (`axis`,
  `keepdims`, ...) are aliases, a lone int list may be given as varargs
  (`x.view(3, 4)`), factories take `requires_grad=`; a method's receiver is
  `self`. Bindings with no namesake schema are not checked (a miss, never a
  false error).
- Python functions (our helpers, `torch.nn.functional.relu`, `Tensor.lu`) are
  bound with `inspect.signature(...).bind` on placeholders.

Checks are deliberately lenient where Python accepts more than a schema says:
a false error on a correct spec is worse than a missed one.
"""

from __future__ import annotations

import ast
import functools
import inspect
from dataclasses import dataclass

import torch

from . import admissible

# The Python argument parser's numpy-compatible names: python name -> schema names.
_ALIASES = {
    "axis": ("dim",),
    "keepdims": ("keepdim",),
    "input": ("self",),
    "x": ("self", "input"),
    "a": ("self", "input"),
    "x1": ("self", "input"),
    "x2": ("other",),
}
# Keywords Python bindings take beyond their schema (factories, `nonzero`).
_PYTHON_ONLY_KEYWORDS = frozenset({"requires_grad", "as_tuple", "names", "out"})
# torch's deprecated Python signatures take these keyword-only Scalars by
# position (`torch.addmm(beta, input, alpha, mat1, mat2)`): each may add one.
_DEPRECATED_POSITIONAL = frozenset({"alpha", "beta", "value"})
# torch functions whose deprecated Python signatures default what the schema
# requires (`torch.linspace(start, end)`): not checked.
_DEPRECATED_FUNCTIONS = frozenset({"linspace", "logspace"})
# Tensor methods written by hand in C (python_variable_methods.cpp) whose
# Python signatures differ from their namesake's schema: not checked.
_HANDWRITTEN_METHODS = frozenset(
    {"to", "type", "new_tensor", "size", "stride", "nonzero", "contiguous"}
)
_MAX_SHOWN = 80


@dataclass(frozen=True)
class _Signature:
    """One way to call a callee, as the Python argument parser sees it."""

    positional: tuple[str, ...]
    names: frozenset[str]
    required: tuple[str, ...]
    varargs_ints: bool  # a lone int list may be given as varargs
    extra_positional: int  # keyword-only Scalars a deprecated signature takes
    shown: bool  # worth showing in a message (no out= variant nor TorchScript)
    python: bool  # Python's aliases and extra keywords apply
    text: str


@dataclass(frozen=True)
class _Shape:
    positional: int
    keywords: tuple[str, ...]


def aten_problem(name: str, overload: str | None, call: ast.Call) -> str | None:
    """`torch.ops.aten.<name>[.<overload>](...)`."""
    if overload is None:
        signatures = _packet_signatures(name)
        what = f"no overload of aten::{name}"
    else:
        signatures = _overload_signatures(name, overload)
        what = f"aten::{name}.{overload}" if overload != "default" else f"aten::{name}"
    return _problem(signatures, call, what, overload is None)


def function_problem(path: str, call: ast.Call) -> str | None:
    """`torch.<path>(...)` (`path` dotted below `torch`)."""
    operator = admissible.binding_operator(path)
    if operator in _DEPRECATED_FUNCTIONS:
        return None
    if operator is not None:
        return _problem(
            _binding_signatures(operator, method=False),
            call,
            f"no overload of torch.{path} (aten::{operator})",
            True,
        )
    function = admissible.resolve(path)
    if admissible.is_c_binding(function):
        return None
    return _bind_problem(function, f"torch.{path}", call)


def method_problem(name: str, call: ast.Call) -> str | None:
    """`<tensor>.<name>(...)`: the receiver is `self`."""
    if name in _HANDWRITTEN_METHODS:
        return None
    if admissible.method_operator(name) is not None:
        return _problem(
            _binding_signatures(name, method=True),
            call,
            f"no overload of Tensor.{name} (aten::{name})",
            True,
        )
    method = getattr(torch.Tensor, name, None)
    if method is None or not inspect.isfunction(method):
        return None
    return _bind_problem(method, f"Tensor.{name}", call, receiver=True)


def helper_problem(function, name: str, call: ast.Call) -> str | None:
    """`<helper>(...)`, a plain Python function of `dualgen.formulas`."""
    return _bind_problem(function, name, call)


# -- matching ----------------------------------------------------------------


def _problem(
    signatures: tuple[_Signature, ...], call: ast.Call, what: str, packet: bool
) -> str | None:
    if not signatures:
        return None
    shape = _Shape(len(call.args), tuple(kw.arg or "" for kw in call.keywords))
    problems = [_mismatch(s, shape) for s in signatures]
    if any(p is None for p in problems):
        return None
    if not packet and len(signatures) == 1:
        why = problems[0][1]
    elif _unknown_keyword(signatures, shape):
        why = f"takes keyword '{_unknown_keyword(signatures, shape)}'"
    elif all(p[0] == "positional" for p in problems):
        why = f"takes {_count(shape.positional)}"
    else:
        why = "takes these arguments"
    shown = "; ".join(_shown(signatures))
    return f"{_call_text(call)}: {what} {why}; {shown}"


def _mismatch(signature: _Signature, shape: _Shape) -> tuple[str, str] | None:
    """(kind, why) this signature refuses the call shape, or None."""
    positional = signature.positional
    if signature.varargs_ints and shape.positional > 1:
        filled = {positional[0]}
    elif shape.positional > len(positional) + signature.extra_positional:
        return "positional", (
            f"takes at most {_count(len(positional))} ({shape.positional} given)"
        )
    else:
        filled = set(positional[: shape.positional])
    for keyword in shape.keywords:
        name = _parameter(signature, keyword)
        if name is None:
            if signature.python and keyword in _PYTHON_ONLY_KEYWORDS:
                continue
            return "keyword", f"takes no keyword '{keyword}'"
        if name in filled:
            return "twice", f"got argument '{keyword}' by position and by keyword"
        filled.add(name)
    missing = [n for n in signature.required if n not in filled]
    if missing:
        return "missing", f"is missing argument '{missing[0]}'"
    return None


def _parameter(signature: _Signature, keyword: str) -> str | None:
    if keyword in signature.names:
        return keyword
    if signature.python:
        for name in _ALIASES.get(keyword, ()):
            if name in signature.names:
                return name
    return None


def _unknown_keyword(signatures, shape: _Shape) -> str | None:
    """A keyword no signature takes under any name."""
    for keyword in shape.keywords:
        if all(_parameter(s, keyword) is None for s in signatures):
            return keyword
    return None


def _count(n: int) -> str:
    return f"{n} positional argument{'' if n == 1 else 's'}"


def _shown(signatures: tuple[_Signature, ...]) -> list[str]:
    """The signatures to show: out= variants and TorchScript overloads on
    Python numbers aside, where any other remains."""
    seen = []
    for s in [s for s in signatures if s.shown] or signatures:
        if s.text not in seen:
            seen.append(s.text)
    return seen


def _call_text(call: ast.Call) -> str:
    text = ast.unparse(call)
    if len(text) <= _MAX_SHOWN:
        return text
    return f"{ast.unparse(call.func)}(...)"


# -- signatures from schemas -------------------------------------------------


def _from_schema(schema, *, method: bool, python: bool) -> _Signature | None:
    arguments = list(schema.arguments)
    if method:
        if not any(a.name == "self" for a in arguments):
            return None
        arguments = [a for a in arguments if a.name != "self"]
    positional = tuple(a.name for a in arguments if not a.kwarg_only)
    names = {a.name for a in arguments}
    first = next((a for a in arguments if not a.kwarg_only), None)
    varargs = python and len(positional) == 1 and "List[int]" in str(first.type)
    return _Signature(
        positional=positional,
        names=frozenset(names),
        required=tuple(a.name for a in arguments if not a.has_default_value()),
        varargs_ints=varargs,
        extra_positional=sum(
            python and a.kwarg_only and a.name in _DEPRECATED_POSITIONAL
            for a in arguments
        ),
        shown=not any(a.is_out for a in schema.arguments)
        and admissible.in_dispatcher(schema),
        python=python,
        text=str(schema),
    )


@functools.cache
def _packet_signatures(name: str) -> tuple[_Signature, ...]:
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    signatures = [_from_schema(s, method=False, python=False) for s in schemas]
    return tuple(s for s in signatures if s is not None)


@functools.cache
def _overload_signatures(name: str, overload: str) -> tuple[_Signature, ...]:
    op = getattr(getattr(torch.ops.aten, name, None), overload, None)
    if not isinstance(op, torch._ops.OpOverload):
        return ()
    return (_from_schema(op._schema, method=False, python=False),)


@functools.cache
def _binding_signatures(name: str, *, method: bool) -> tuple[_Signature, ...]:
    signatures = [
        _from_schema(schema, method=method, python=True)
        for schema in admissible.dispatcher_schemas(name)
    ]
    return tuple(s for s in signatures if s is not None)


# -- Python functions --------------------------------------------------------


def _bind_problem(
    function, name: str, call: ast.Call, receiver: bool = False
) -> str | None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    args = [None] * (len(call.args) + receiver)
    try:
        _check_keywords(signature, call)
        signature.bind(*args, **{kw.arg: None for kw in call.keywords if kw.arg})
    except TypeError as exc:
        parameters = [
            p.replace(annotation=p.empty) for p in signature.parameters.values()
        ]
        shown = signature.replace(
            parameters=parameters[receiver:], return_annotation=signature.empty
        )
        return f"{_call_text(call)}: {exc}; {name}{shown}"
    return None


def _check_keywords(signature: inspect.Signature, call: ast.Call) -> None:
    """An unknown keyword is the first thing to say (`bind` would first report
    the argument it left missing)."""
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    names = {p.name for p in parameters if p.kind is not p.POSITIONAL_ONLY}
    for kw in call.keywords:
        if kw.arg not in names:
            raise TypeError(f"got an unexpected keyword argument '{kw.arg}'")
