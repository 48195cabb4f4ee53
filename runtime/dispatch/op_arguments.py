"""An op's arguments in its schema's order, defaults filled in (`bind`), for the
dispatch mode and the reverse tape, which both see `func(*args, **kwargs)`."""

from __future__ import annotations


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
