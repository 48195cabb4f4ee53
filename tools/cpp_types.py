"""C++ types of schema values, for the C++ printer and the C++ kernel templates.

Python values and their C++ forms are listed in runtime/csrc/dualgen/formulas/
common.h; this module is that table for the generator: the type a kernel declares
for each argument, the type an expression of a schema type has, and schema
defaults written as C++.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from .model import Argument, OperatorSchema, SchemaType
from .schema import parse_schema


class CppError(ValueError):
    """A formula the C++ printer cannot print (reported at the entry's line)."""


@dataclass(frozen=True)
class Type:
    """The type of a printed expression: a name from the table below, and for
    a tuple (ATen's several returns) the type of each item."""

    name: str
    items: tuple[Type, ...] = ()

    @property
    def is_tensor(self) -> bool:
        return self.name == "Tensor"


# (base, optional?, list?) -> (C++ declaration, expression type)
_BASES = {
    "int": ("int64_t", "int"),
    "SymInt": ("int64_t", "int"),
    "float": ("double", "double"),
    "bool": ("bool", "bool"),
    "Scalar": ("c10::Scalar", "Scalar"),
    "str": ("std::string", "str"),
    "ScalarType": ("at::ScalarType", "ScalarType"),
    "Layout": ("at::Layout", "Layout"),
    "Device": ("at::Device", "Device"),
    "MemoryFormat": ("at::MemoryFormat", "MemoryFormat"),
    "Generator": ("at::Generator", "Generator"),
}
_LISTS = {
    "int": ("std::vector<int64_t>", "IntList"),
    "SymInt": ("std::vector<int64_t>", "IntList"),
    "float": ("std::vector<double>", "FloatList"),
    "bool": ("std::vector<bool>", "BoolList"),
    "Scalar": ("std::vector<c10::Scalar>", "ScalarList"),
}


def declaration(t: SchemaType) -> str:
    """The C++ type a kernel declares for a value of schema type `t`."""
    return _declared(t)[0]


def of_schema(t: SchemaType) -> Type:
    """The type an expression of schema type `t` has in a kernel."""
    return Type(_declared(t)[1])


def _declared(t: SchemaType) -> tuple[str, str]:
    suffix = t.suffix
    optional = suffix.endswith("?") and not suffix.endswith("?[]")
    listed = "[" in suffix
    if t.base == "Tensor":
        if suffix in ("", "?"):
            return "at::Tensor", "Tensor"
        if suffix == "[]":
            return "TensorList", "TensorList"
        if suffix == "?[]":
            return "c10::List<std::optional<at::Tensor>>", "OptionalTensorList"
    elif listed and t.base in _LISTS:
        cpp, name = _LISTS[t.base]
        if optional and name == "IntList":
            return "OptionalInts", "OptionalIntList"
        if optional:
            return f"std::optional<{cpp}>", f"Optional{name}"
        return cpp, name
    elif not listed and t.base in _BASES:
        cpp, name = _BASES[t.base]
        if optional:
            return f"std::optional<{cpp}>", f"Optional{name}"
        return cpp, name
    raise CppError(f"schema type {t} has no C++ form in dualgen")


def parameter_kind(t: SchemaType) -> str:
    """What an ATen parameter of type `t` takes, where the printer converts."""
    listed = "[" in t.suffix
    optional = t.suffix.endswith("?") and not t.suffix.endswith("?[]")
    if t.base == "Tensor" and t.suffix == "?":
        return "OptionalTensor"
    if t.base == "SymInt" and listed:
        return "OptionalSymIntList" if optional else "SymIntList"
    if t.base == "int" and listed:
        return "OptionalIntList" if optional else "IntList"
    return of_schema(t).name


@functools.cache
def parsed(schema_text: str) -> OperatorSchema:
    """torch's FunctionSchema (its text) as dualgen's model, which keeps SymInt
    and ScalarType apart from int (torch's Python types do not)."""
    return parse_schema(schema_text)


def model_of(schema: torch._C.FunctionSchema) -> OperatorSchema:
    return parsed(str(schema))


def return_type(schema: OperatorSchema) -> Type:
    returns = schema.returns
    if len(returns) == 1:
        return of_schema(returns[0].type)
    if not returns:
        return Type("None")
    return Type("tuple", tuple(of_schema(r.type) for r in returns))


_ENUM_DEFAULTS = {
    "Mean": "at::Reduction::Mean",
    "Sum": "at::Reduction::Sum",
    "contiguous_format": "at::MemoryFormat::Contiguous",
    "long": "at::kLong",
}


def default_literal(argument: Argument) -> str:
    """The schema default of `argument` as a C++ argument of its type."""
    text = argument.default
    kind = parameter_kind(argument.type)
    if text == "None":
        return "std::nullopt"
    if text in ("True", "False"):
        return text.lower()
    if text in _ENUM_DEFAULTS:
        return _ENUM_DEFAULTS[text]
    if text.startswith("["):
        items = [i.strip() for i in text[1:-1].split(",") if i.strip()]
        ints = ", ".join(items)
        if kind in ("SymIntList", "OptionalSymIntList"):
            return f"c10::SymIntArrayRef{{{', '.join(f'c10::SymInt({i})' for i in items)}}}"
        if argument.type.base == "bool":
            return f"std::array<bool, {len(items)}>{{{', '.join(i.lower() for i in items)}}}"
        return f"at::IntArrayRef{{{ints}}}"
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
        literal = str(value) if -(2**31) < value < 2**31 else f"int64_t{{{value}}}"
        return (
            f"c10::SymInt({literal})"
            if kind == "int" and argument.type.base == "SymInt"
            else literal
        )
    if re.fullmatch(r"-?[\d.]+(e-?\d+)?", text):
        return text if "." in text or "e" in text else f"{text}.0"
    if text.startswith(("'", '"')):
        return '"' + text[1:-1] + '"'
    raise CppError(f"schema default {argument.name}={text} has no C++ form in dualgen")


def python_default_literal(value, where: str) -> str:
    """A helper parameter's Python default as a C++ argument."""
    if value is None:
        return "None"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f'"{value}"'
    raise CppError(f"{where}: default {value!r} has no C++ form in dualgen")
