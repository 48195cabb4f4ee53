"""Operator schemas as text: the records (`OperatorSchema`, `Argument`,
`SchemaType`, `TypeKind`), `parse_schema` and `needs_value`.

A leaf shared by the runtime (`dualgen.missing` writes spec stubs with it) and
the generator: it reads a schema's text and produces the records, which print
back to the same text. It imports nothing of dualgen's.
"""

from __future__ import annotations

import enum
import keyword
from dataclasses import dataclass


class TypeKind(enum.Enum):
    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_TENSOR_LIST = "Tensor?[]"
    OTHER = "other"

    @property
    def is_tensor_like(self) -> bool:
        return self is not TypeKind.OTHER

    @property
    def is_list(self) -> bool:
        return self in (TypeKind.TENSOR_LIST, TypeKind.OPTIONAL_TENSOR_LIST)


@dataclass(frozen=True)
class Alias:
    """An alias annotation: `a`, `a!` (written to), `a -> *` (aliases a list)."""

    text: str

    @property
    def is_write(self) -> bool:
        return self.text.split("->")[0].strip().endswith("!")

    @property
    def set_name(self) -> str:
        return self.text.split("->")[0].strip().rstrip("!")


@dataclass(frozen=True)
class SchemaType:
    base: str  # "Tensor", "int", "SymInt", "Scalar", ...
    alias: Alias | None
    suffix: str  # "", "?", "[]", "[1]?", "?[]", ...
    alias_after_suffix: bool = False  # `Tensor[](a)` rather than `Tensor(a)[]`

    def __str__(self) -> str:
        alias = f"({self.alias.text})" if self.alias else ""
        if self.alias_after_suffix:
            return f"{self.base}{self.suffix}{alias}"
        return f"{self.base}{alias}{self.suffix}"

    @property
    def kind(self) -> TypeKind:
        if self.base != "Tensor":
            return TypeKind.OTHER
        return {
            "": TypeKind.TENSOR,
            "?": TypeKind.OPTIONAL_TENSOR,
            "[]": TypeKind.TENSOR_LIST,
            "?[]": TypeKind.OPTIONAL_TENSOR_LIST,
        }.get(self.suffix, TypeKind.OTHER)


@dataclass(frozen=True)
class Argument:
    name: str
    type: SchemaType
    default: str | None
    kwarg_only: bool

    def __str__(self) -> str:
        default = f"={self.default}" if self.default is not None else ""
        return f"{self.type} {self.name}{default}"

    @property
    def kind(self) -> TypeKind:
        return self.type.kind

    @property
    def py_name(self) -> str:
        """The argument's name as a Python identifier (`from` becomes `from_`)."""
        return python_name(self.name)


@dataclass(frozen=True)
class Return:
    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return f"{self.type} {self.name}" if self.name else str(self.type)


class OpKind(enum.Enum):
    FUNCTIONAL = "functional"
    INPLACE = "inplace"
    OUT = "out"
    VIEW = "view"


@dataclass(frozen=True)
class OperatorSchema:
    name: str  # "add_"
    overload: str  # "Tensor", or "" for the default overload
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    # "aten", or a custom op's library ("mylib" for torch.library.custom_op
    # ("mylib::softclip")). Aten names are written bare, the others qualified.
    namespace: str = "aten"

    def __str__(self) -> str:
        args: list[str] = []
        star = False
        for arg in self.arguments:
            if arg.kwarg_only and not star:
                args.append("*")
                star = True
            args.append(str(arg))
        if len(self.returns) == 1:
            returns = str(self.returns[0])
        else:
            returns = "(" + ", ".join(str(r) for r in self.returns) + ")"
        return f"{self.full_name}({', '.join(args)}) -> {returns}"

    @property
    def full_name(self) -> str:
        """`add_.Tensor`, or `add_` for the default overload; `mylib::softclip` for
        an operator outside aten."""
        return self.qualify(
            f"{self.name}.{self.overload}" if self.overload else self.name
        )

    @property
    def is_aten(self) -> bool:
        return self.namespace == "aten"

    def qualify(self, name: str) -> str:
        """`name` (of this schema's namespace) as the spec writes it: bare for aten,
        `ns::name` otherwise."""
        return name if self.is_aten else f"{self.namespace}::{name}"

    @property
    def qualified(self) -> str:
        """The schema with its namespace, as torch prints it: `aten::add.Tensor(...)`."""
        return f"aten::{self}" if self.is_aten else str(self)

    @property
    def operator_key(self) -> str:
        """`aten::add.Tensor`, `mylib::softclip.default`: the overload's name in
        the runtime."""
        return f"{self.namespace}::{self.name}.{self.overload_attr}"

    @property
    def overload_attr(self) -> str:
        """The attribute of the OpOverloadPacket: `Tensor`, or `default`."""
        return self.overload or "default"

    @property
    def kernel_name(self) -> str:
        """A Python identifier naming this overload's kernels: `add__Tensor`."""
        kernel = f"{self.name}_{self.overload_attr}"
        return kernel if self.is_aten else f"{self.namespace}_{kernel}"

    def argument(self, name: str) -> Argument | None:
        for arg in self.arguments:
            if arg.name == name:
                return arg
        return None

    @property
    def kind(self) -> OpKind:
        if any(
            a.kwarg_only and a.type.alias and a.type.alias.is_write
            for a in self.arguments
        ):
            return OpKind.OUT
        first = self.arguments[0] if self.arguments else None
        if (
            first is not None
            and first.name == "self"
            and first.type.alias is not None
            and first.type.alias.is_write
            and self.name.endswith("_")
        ):
            return OpKind.INPLACE
        if any(
            r.type.alias is not None and not r.type.alias.is_write for r in self.returns
        ):
            return OpKind.VIEW
        return OpKind.FUNCTIONAL

    @property
    def functional_name(self) -> str:
        """`add.Tensor` for `add_.Tensor`: the out-of-place overload's full name."""
        base = self.name.removesuffix("_")
        return self.qualify(f"{base}.{self.overload}" if self.overload else base)

    def output_names(self) -> tuple[str, ...]:
        """Names formulas use for the outputs: `result` alone, else `result0`, ... or
        the schema's own names where it gives them."""
        if len(self.returns) == 1:
            return ("result",)
        return tuple(r.name or f"result{i}" for i, r in enumerate(self.returns))


def python_name(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) else name


class SchemaSyntaxError(ValueError):
    pass


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and string literals."""
    parts, depth, quote, current = [], 0, None, []
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise SchemaSyntaxError(f"unbalanced '{ch}'")
        elif ch == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if depth != 0 or quote:
        raise SchemaSyntaxError("unbalanced brackets or quotes")
    tail = "".join(current).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def _parse_type(text: str) -> SchemaType:
    i = 0
    # (a class type is dotted: `__torch__.torch.classes.c10d.ProcessGroup`)
    while i < len(text) and (text[i].isalnum() or text[i] in "_."):
        i += 1
    base = text[:i]
    if not base:
        raise SchemaSyntaxError(f"expected a type, found '{text}'")
    alias, alias_last = None, False
    suffix = ""
    while i < len(text):
        if text[i] == "(":
            close = text.find(")", i)
            if close < 0 or alias is not None:
                raise SchemaSyntaxError(f"malformed alias annotation in '{text}'")
            alias, alias_last = Alias(text[i + 1 : close]), bool(suffix)
            i = close + 1
        elif text[i] in "[]?0123456789":
            suffix += text[i]
            i += 1
        else:
            raise SchemaSyntaxError(f"malformed type '{text}'")
    return SchemaType(base, alias, suffix, alias_last)


def _split_type_and_rest(text: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == " " and depth == 0:
            return text[:i], text[i + 1 :].strip()
    return text, ""


def _parse_argument(text: str, kwarg_only: bool) -> Argument:
    type_text, rest = _split_type_and_rest(text)
    if not rest:
        raise SchemaSyntaxError(f"argument '{text}' has no name")
    name, eq, default = rest.partition("=")
    name = name.strip()
    if not name.isidentifier():
        raise SchemaSyntaxError(f"bad argument name '{name}'")
    return Argument(
        name, _parse_type(type_text), default.strip() if eq else None, kwarg_only
    )


def _parse_returns(text: str) -> tuple[Return, ...]:
    if text.startswith("(") and text.endswith(")"):
        items = _split_top_level(text[1:-1])
    else:
        items = [text]
    returns = []
    for item in items:
        type_text, name = _split_type_and_rest(item)
        if name and not name.isidentifier():
            raise SchemaSyntaxError(f"bad return name '{name}'")
        returns.append(Return(name or None, _parse_type(type_text)))
    return tuple(returns)


def parse_schema(text: str) -> OperatorSchema:
    """Parse schema notation, with or without the `aten::` namespace; another
    namespace (`mylib::softclip(...)`, a custom op) is kept in the schema."""
    text = " ".join(text.split())
    text = text.removeprefix("aten::")
    namespace = "aten"
    head, paren, rest = text.partition("(")
    if "::" in head:
        namespace, _, head = head.partition("::")
        namespace = namespace.strip()
        if not namespace.isidentifier() or namespace == "aten":
            raise SchemaSyntaxError(f"bad operator namespace '{namespace}'")
    if not paren:
        raise SchemaSyntaxError("expected '(' after the operator name")
    depth, close = 1, -1
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            close = i
            break
    if close < 0:
        raise SchemaSyntaxError("unclosed argument list")
    args_text, tail = rest[:close], rest[close + 1 :].strip()
    if not tail.startswith("->"):
        raise SchemaSyntaxError("expected '->' and the returns after the arguments")
    name, _, overload = head.strip().partition(".")
    if not name.isidentifier() or (overload and not overload.isidentifier()):
        raise SchemaSyntaxError(f"bad operator name '{head.strip()}'")
    arguments, kwarg_only = [], False
    for item in _split_top_level(args_text):
        if item == "*":
            kwarg_only = True
            continue
        arguments.append(_parse_argument(item, kwarg_only))
    returns = _parse_returns(tail[2:].strip())
    return OperatorSchema(name, overload, tuple(arguments), returns, namespace)


def needs_value(argument: Argument) -> bool:
    """True if neither the schema nor the argument's type gives a sample value."""
    if argument.default is not None or argument.kind is not TypeKind.OTHER:
        return False
    t = argument.type
    if t.suffix.endswith("?"):
        return False
    return not (
        t.suffix == "" and t.base in ("int", "bool", "float", "Scalar", "ScalarType")
    )
