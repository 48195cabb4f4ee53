"""Binding a formula's call to an aten schema as Python's argument parser would:
positional arguments (ints given as varargs for a lone int list), keywords and
numpy's aliases; for the C++ printer, which passes every argument by position."""

from __future__ import annotations

import ast


def binds(schema, node: ast.Call, method: bool) -> bool:
    arguments = [a for a in schema.arguments if not (method and a.name == "self")]
    if method and len(arguments) == len(schema.arguments):
        return False
    positional = positional_arguments(arguments)
    given = given_arguments(positional, node)
    if len(given) > len(positional):
        return False
    filled = {a.name for a in positional[: len(given)]}
    for kw in node.keywords:
        name = schema_name(kw.arg, arguments)
        if name is None or name in filled:
            return False
        filled.add(name)
    return all(a.name in filled or a.default is not None for a in arguments)


def positional_arguments(arguments) -> list:
    return [a for a in arguments if not a.kwarg_only]


def given_arguments(positional, node: ast.Call) -> list:
    """The call's positional arguments, ints given as varargs for a lone int
    list (`x.reshape(5, 7)`) gathered into one list, as Python's parser does."""
    lone_list = (
        len(positional) == 1
        and positional[0].type.base in ("int", "SymInt")
        and "[" in positional[0].type.suffix
    )
    if lone_list and len(node.args) > 1:
        return [ast.List(elts=list(node.args), ctx=ast.Load())]
    return list(node.args)


_ALIASES = {"axis": "dim", "keepdims": "keepdim", "input": "self"}


def schema_name(keyword: str, arguments) -> str | None:
    names = {a.name for a in arguments}
    if keyword in names:
        return keyword
    alias = _ALIASES.get(keyword)
    return alias if alias in names else None
