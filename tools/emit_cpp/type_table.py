"""The one table of how Python's values are written in C++: for each schema type,
the type a kernel declares for an argument, the type an expression has for the C++
printer, how a C++ twin of a helper takes it and how its binding hands it over;
and schema defaults written as C++. (runtime/csrc/dualgen/formulas/common.h holds
the few definitions the table relies on.)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from ..spec.model import Argument, OperatorSchema, SchemaType
from ..spec.schema import parse_schema


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
    # ATen's enums and records: at::<name>, typed by their name
    **{
        name: (f"at::{name}", name)
        for name in ("ScalarType", "Layout", "Device", "MemoryFormat", "Generator")
    },
}
# A list is a vector of its base's C++ type.
_LIST_NAMES = {
    "int": "IntList", "SymInt": "IntList", "float": "FloatList", "bool": "BoolList",
    "Scalar": "ScalarList",
}  # fmt: skip
_LISTS = {
    base: (f"std::vector<{_BASES[base][0]}>", name)
    for base, name in _LIST_NAMES.items()
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


# -- helpers' C++ twins: how a twin takes a value, and how a binding hands it over.
# A twin's parameter of schema type T is declared as below (cheap views of lists,
# an undefined tensor for None); the binding that exposes the twin to Python for
# its parity test takes pybind11's form and converts. One row per schema type.
@dataclass(frozen=True)
class TwinForm:
    parameter: str  # the twin's parameter type
    bound: str  # the binding's parameter type (pybind11 loads it)
    convert: str  # the binding's argument to the twin ({} is the bound value)


_OPTIONAL_TENSOR = "const std::optional<at::Tensor>&"
_TWIN_FORMS = {
    "Tensor": TwinForm("const at::Tensor&", _OPTIONAL_TENSOR, "binding::tensor({})"),
    "Tensor?": TwinForm("const at::Tensor&", _OPTIONAL_TENSOR, "binding::tensor({})"),
    "Tensor[]": TwinForm(
        "const TensorList&",
        "const std::optional<std::vector<std::optional<at::Tensor>>>&",
        "binding::tensors({})",
    ),
    "Tensor?[]": TwinForm(
        "const c10::List<std::optional<at::Tensor>>&",
        "const std::vector<std::optional<at::Tensor>>&",
        "binding::optional_tensors({})",
    ),
    "int": TwinForm("int64_t", "int64_t", "{}"),
    "int?": TwinForm("std::optional<int64_t>", "std::optional<int64_t>", "{}"),
    "int[]": TwinForm("at::IntArrayRef", "const std::vector<int64_t>&", "{}"),
    "int[]?": TwinForm(
        "at::OptionalIntArrayRef", "const pybind11::object&", "binding::int_list({})"
    ),
    "float": TwinForm("double", "double", "{}"),
    "float?": TwinForm("std::optional<double>", "std::optional<double>", "{}"),
    "bool": TwinForm("bool", "bool", "{}"),
    "bool?": TwinForm("std::optional<bool>", "std::optional<bool>", "{}"),
    "Scalar": TwinForm(
        "const c10::Scalar&", "const pybind11::object&", "binding::scalar({})"
    ),
    "Scalar?": TwinForm(
        "const std::optional<c10::Scalar>&",
        "const pybind11::object&",
        "binding::optional_scalar({})",
    ),
    "str": TwinForm("c10::string_view", "const std::string&", "{}"),
    "str?": TwinForm(
        "std::optional<c10::string_view>",
        "const std::optional<std::string>&",
        "binding::string({})",
    ),
}
# What a twin may return; it is declared as a kernel declares the type.
_TWIN_RETURNS = frozenset(("Tensor", "Tensor[]", "float", "int", "bool", "int[]"))


def _twin_key(t: SchemaType) -> str:
    suffix = t.suffix
    if suffix.startswith("[") and suffix[1:2].isdigit():  # int[2] reads as int[]
        suffix = "[]" + suffix[suffix.index("]") + 1 :]
    return ("int" if t.base == "SymInt" else t.base) + suffix


def twin_form(t: SchemaType) -> TwinForm:
    """How a twin takes a value of schema type `t`."""
    form = _TWIN_FORMS.get(_twin_key(t))
    if form is None:
        raise CppError(f"schema type {t} has no C++ form for a twin's parameter")
    return form


def twin_return(t: SchemaType) -> tuple[str, Type]:
    """A twin's C++ return type for schema type `t`, and its expression type."""
    if _twin_key(t) not in _TWIN_RETURNS:
        raise CppError(f"schema type {t} has no C++ form for a twin's result")
    cpp, name = _declared(t)
    return cpp, Type(name)
