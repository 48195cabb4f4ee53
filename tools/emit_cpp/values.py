"""Names, literals and printed expressions of the C++ printer (`cpp_printer`)."""

from __future__ import annotations

import math

from .type_table import CppError, Type

CPP_KEYWORDS = frozenset(
    [
        "alignas",
        "alignof",
        "and",
        "and_eq",
        "asm",
        "auto",
        "bitand",
        "bitor",
        "bool",
        "break",
        "case",
        "catch",
        "char",
        "char16_t",
        "char32_t",
        "class",
        "compl",
        "const",
        "constexpr",
        "const_cast",
        "continue",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "dynamic_cast",
        "else",
        "enum",
        "explicit",
        "export",
        "extern",
        "false",
        "float",
        "for",
        "friend",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "mutable",
        "namespace",
        "new",
        "noexcept",
        "not",
        "not_eq",
        "nullptr",
        "operator",
        "or",
        "or_eq",
        "private",
        "protected",
        "public",
        "register",
        "reinterpret_cast",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "static_assert",
        "static_cast",
        "struct",
        "switch",
        "template",
        "this",
        "thread_local",
        "throw",
        "true",
        "try",
        "typedef",
        "typeid",
        "typename",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "wchar_t",
        "while",
        "xor",
        "xor_eq",
        "args",
        "tangents",
        "outputs",
    ]
)


def cpp_name(name: str) -> str:
    """A Python identifier as a C++ one (C++ keywords and the kernel's own
    parameter names get a trailing underscore)."""
    return f"{name}_" if name in CPP_KEYWORDS else name


class Printed:
    """A C++ expression, the type of its value, and the precedence of its
    outermost operator (C++'s: higher binds tighter; 100 for an atom)."""

    __slots__ = ("prec", "text", "type")

    def __init__(self, text: str, type_: Type, prec: int = 100):
        self.text = text
        self.type = type_
        self.prec = prec


SCALAR_TYPES = {
    "float64": "Double",
    "float32": "Float",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "complex128": "ComplexDouble",
    "complex64": "ComplexFloat",
    "int64": "Long",
    "int32": "Int",
    "bool": "Bool",
}


def constant(value) -> Printed:
    if value is None:
        return Printed("None", Type("None"))
    if value is True or value is False:
        return Printed("true" if value else "false", Type("bool"))
    if isinstance(value, int):
        if -(2**31) < value < 2**31:
            return Printed(str(value), Type("int"))
        return Printed(f"int64_t{{{value}}}", Type("int"))
    if isinstance(value, float):
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return Printed(
                f"{sign}std::numeric_limits<double>::infinity()", Type("double")
            )
        if math.isnan(value):
            return Printed("std::numeric_limits<double>::quiet_NaN()", Type("double"))
        text = repr(value)
        if "." not in text and "e" not in text:
            text += ".0"
        return Printed(text, Type("double"))
    if isinstance(value, complex):
        real, imag = constant(value.real).text, constant(value.imag).text
        return Printed(
            f"c10::Scalar(c10::complex<double>({real}, {imag}))", Type("Scalar")
        )
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return Printed(f'"{escaped}"', Type("str"))
    raise CppError(f"cannot print the constant {value!r} as C++")
