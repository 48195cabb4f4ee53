"""Formula text -> checked `ast` tree, against a closed vocabulary.

Formulas are code we run, so a spec must not be able to run anything else: only
names in scope, our helpers (`dualgen.formulas`) and `torch` functions from an
allowed set of namespaces that are pure, deterministic tensor math (decided from
what each operator is: `admissible`); no dunders, lambdas, comprehensions, walrus,
f-strings, starred arguments, or calls to builtins.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from dualgen import formulas as helper_module

from . import admissible, calls
from .suggest import closest, did_you_mean

MAX_FORMULA_CHARS = 4000
MAX_DEPTH = 150
_TOO_DEEP = f"formula is nested more than {MAX_DEPTH} levels deep"

# The helpers formulas may call, by name: dualgen.formulas' own, overlaid by the
# generator with this run's one-source helpers (helpers.yaml), so a helper written
# there is callable before its generated Python is installed.
HELPERS: dict[str, object] = {
    n: getattr(helper_module, n) for n in helper_module.__all__
}


def use_one_source_helpers(functions: dict[str, object]) -> None:
    HELPERS.update(functions)


# torch namespaces a formula may reach into, besides plain `torch.<function>`.
_TORCH_NAMESPACES = ("linalg", "special", "fft", "nn.functional", "ops.aten")
# Attributes that reach outside the tensor's value (autograd state, raw data).
# Methods are judged by what they are (`tools/check/admissible.py`).
_ATTRIBUTES_DENIED = frozenset({"data", "grad", "grad_fn"})
# Keyword arguments through which a torch function writes into a tensor.
_MUTATING_KEYWORDS = admissible.MUTATING_PARAMETERS

_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.keyword,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Name,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)

_FORBIDDEN_WHY = {
    ast.Lambda: "lambdas are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.NamedExpr: "':=' (walrus) is not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.FormattedValue: "f-strings are not allowed",
    ast.Starred: "starred expressions are not allowed",
    ast.Await: "'await' is not allowed",
    ast.Yield: "'yield' is not allowed",
    ast.YieldFrom: "'yield' is not allowed",
    ast.Dict: "dict displays are not allowed",
    ast.Set: "set displays are not allowed",
}


class FormulaError(ValueError):
    """A formula broke a rule; the builder attaches location and entry."""


@dataclass(frozen=True)
class Scope:
    """The names one formula may use.

    `names`: values in scope. `hints`: names that are not in scope but that a
    writer may plausibly use, with the fix to suggest.
    """

    names: frozenset[str]
    hints: Mapping[str, str] = field(default_factory=dict)


def parse_formula(source: str, scope: Scope) -> ast.expr:
    """Parse and check one formula; raise FormulaError saying what is wrong."""
    if not source.strip():
        raise FormulaError("formula is empty")
    if len(source) > MAX_FORMULA_CHARS:
        raise FormulaError(f"formula is longer than {MAX_FORMULA_CHARS} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        col = f" (column {exc.offset})" if exc.offset else ""
        raise FormulaError(f"invalid syntax in formula: {exc.msg}{col}") from None
    except (RecursionError, MemoryError):
        # Whether the parser runs out of stack depends on the process's recursion
        # limit at that moment (others may raise it): one message either way.
        raise FormulaError(_TOO_DEEP) from None
    except ValueError as exc:  # null bytes
        raise FormulaError(f"invalid formula: {exc}") from None
    _check_depth(tree)
    _Checker(scope).visit(tree)
    return tree.body


def _check_depth(tree: ast.AST) -> None:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise FormulaError(_TOO_DEEP)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def dotted_path(node: ast.expr) -> list[str] | None:
    """`torch.nn.functional.relu` -> ["torch", "nn", "functional", "relu"]."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def check_torch_path(parts: list[str]) -> None:
    """Raise unless `torch.<parts...>` exists and lies in an allowed namespace."""
    rest = parts[1:]
    if not rest:
        raise FormulaError("'torch' is only allowed as `torch.<function>`")
    dotted = ".".join(rest)
    namespace = next(
        (ns for ns in _TORCH_NAMESPACES if dotted.startswith(ns + ".")), None
    )
    inner = rest[len(namespace.split(".")) :] if namespace else rest
    if any(p.endswith("_") and not _is_dunder(p) for p in inner):
        raise FormulaError(f"'torch.{dotted}' is not allowed in formulas (it mutates)")
    if namespace != "ops.aten" and any(p.startswith("_") for p in inner):
        raise FormulaError(f"private name 'torch.{dotted}' is not allowed in formulas")
    obj = torch
    for i, part in enumerate(rest):
        if not hasattr(obj, part):
            where = "torch." + ".".join(rest[:i]) if i else "torch"
            choices = [n for n in dir(obj) if not n.startswith("_")]
            raise FormulaError(
                f"'{where}' has no '{part}'{_did_you_mean(part, choices)}"
            )
        obj = getattr(obj, part)
    if namespace is None and len(rest) > 1 and type(obj).__name__ != "dtype":
        raise FormulaError(
            f"'torch.{dotted}' is outside the allowed namespaces "
            f"(torch, {', '.join('torch.' + ns for ns in _TORCH_NAMESPACES)})"
        )
    if callable(obj) and not isinstance(obj, torch.dtype):
        why = admissible.why_not(dotted)
        if why is not None:
            raise FormulaError(f"'torch.{dotted}' is not allowed in formulas: it {why}")


def _did_you_mean(name: str, choices) -> str:
    return did_you_mean(closest(name, choices))


class _Checker(ast.NodeVisitor):
    def __init__(self, scope: Scope):
        self.scope = scope

    def generic_visit(self, node: ast.AST) -> None:
        why = _FORBIDDEN_WHY.get(type(node))
        if why:
            raise FormulaError(why)
        if not isinstance(node, _ALLOWED_NODES):
            raise FormulaError(f"'{type(node).__name__}' expressions are not allowed")
        super().generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, bytes):
            raise FormulaError("bytes literals are not allowed")

    def visit_Name(self, node: ast.Name) -> None:
        self._check_value_name(node.id)

    def _check_value_name(self, name: str) -> None:
        if name in self.scope.names:
            return
        if name in self.scope.hints:
            raise FormulaError(self.scope.hints[name])
        if name == "torch":
            raise FormulaError("'torch' is only allowed as `torch.<function>`")
        if name in HELPERS:
            raise FormulaError(f"helper '{name}' must be called, not used as a value")
        if _is_dunder(name):
            raise FormulaError(f"dunder name '{name}' is not allowed")
        if hasattr(builtins, name):
            raise FormulaError(f"builtin '{name}' is not allowed in formulas")
        choices = set(self.scope.names) | set(self.scope.hints) | set(HELPERS)
        raise FormulaError(f"unknown name '{name}'{_did_you_mean(name, choices)}")

    def visit_Attribute(self, node: ast.Attribute, called: bool = False) -> None:
        if _is_dunder(node.attr):
            raise FormulaError(f"dunder attribute '{node.attr}' is not allowed")
        path = dotted_path(node)
        if path is not None and path[0] == "torch" and "torch" not in self.scope.names:
            check_torch_path(path)
            return
        self._check_tensor_attribute(node.attr)
        if not called and callable(getattr(torch.Tensor, node.attr)):
            raise FormulaError(
                f"method '{node.attr}' must be called, not used as a value"
            )
        if called:
            why = admissible.why_not_method(node.attr)
            if why is not None:
                raise FormulaError(
                    f"'.{node.attr}' is not allowed in formulas: it {why}"
                )
        self.visit(node.value)

    def _check_tensor_attribute(self, attr: str) -> None:
        if attr in _ATTRIBUTES_DENIED or (
            attr.endswith("_") and not attr.startswith("_")
        ):
            raise FormulaError(
                f"'.{attr}' is not allowed in formulas (it mutates or escapes)"
            )
        if attr.startswith("_"):
            raise FormulaError(f"private attribute '{attr}' is not allowed")
        if not hasattr(torch.Tensor, attr):
            choices = [n for n in dir(torch.Tensor) if not n.startswith("_")]
            raise FormulaError(
                f"Tensor has no attribute '{attr}'{_did_you_mean(attr, choices)}"
            )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
            if name not in HELPERS:
                if name in self.scope.names:
                    raise FormulaError(f"'{name}' is not a function")
                if hasattr(builtins, name):
                    raise FormulaError(f"calls to builtins are not allowed ('{name}')")
                raise FormulaError(
                    f"unknown function '{name}'{_did_you_mean(name, HELPERS)}"
                )
        elif isinstance(func, ast.Attribute):
            self.visit_Attribute(func, called=True)
            path = dotted_path(func)
            if path is not None and path[0] == "torch":
                _check_positional_mutation(path, len(node.args))
        else:
            self.visit(func)  # a lambda or a comprehension says what it is
            raise FormulaError("only named functions and methods may be called")
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            if kw.arg is None:
                raise FormulaError("'**' arguments are not allowed")
            if _is_dunder(kw.arg):
                raise FormulaError(f"dunder keyword '{kw.arg}' is not allowed")
            if kw.arg in _MUTATING_KEYWORDS:
                raise FormulaError(
                    f"keyword '{kw.arg}=' is not allowed in formulas (it mutates)"
                )
            self.visit(kw.value)
        problem = self._call_problem(node)
        if problem is not None:
            raise FormulaError(problem)

    def _call_problem(self, node: ast.Call) -> str | None:
        """What is wrong with the call's arity or keyword names (`calls`)."""
        func = node.func
        if isinstance(func, ast.Name):
            return calls.helper_problem(HELPERS[func.id], func.id, node)
        path = dotted_path(func)
        if path is not None and path[0] == "torch" and "torch" not in self.scope.names:
            if path[1:3] == ["ops", "aten"]:
                if len(path) < 4:
                    return None
                overload = path[4] if len(path) > 4 else None
                return calls.aten_problem(path[3], overload, node)
            return calls.function_problem(".".join(path[1:]), node)
        return calls.method_problem(func.attr, node)


def _check_positional_mutation(path: list[str], positional: int) -> None:
    """`F.relu(x, True)`: `inplace` given by position, which the keyword check
    cannot see."""
    found = admissible.mutating_position(".".join(path[1:]))
    if found is not None and positional > found[0]:
        raise FormulaError(
            f"argument '{found[1]}' of 'torch.{'.'.join(path[1:])}' is not allowed "
            f"in formulas (it mutates)"
        )


def names_used(tree: ast.AST) -> set[str]:
    """Every plain name the formula reads (helpers and `torch` excluded)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id != "torch" and node.id not in HELPERS:
            found.add(node.id)
    return found


def helpers_used(tree: ast.AST) -> set[str]:
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in HELPERS
    }


def check_expression(tree: ast.expr, scope: Scope) -> None:
    """The checks of `parse_formula` on an expression parsed elsewhere (a statement
    of a one-source helper's body); raise FormulaError."""
    _check_depth(tree)
    _Checker(scope).visit(tree)
