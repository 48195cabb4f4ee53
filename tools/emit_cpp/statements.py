"""A one-source helper's body -> the statements of its C++ twin.

`CppPrinter` prints each expression; this prints the four statement kinds around
them. Locals are declared where first assigned (`auto x = ...;`, typed by the
printer). A name first assigned inside an `if` is declared before it, with the
C++ type of its value, so code after the `if` sees it as Python does.
"""

from __future__ import annotations

import ast

from .printer import CppPrinter
from .type_table import CppError, Type
from .values import cpp_name

# The C++ type a local of each printed type is declared with.
_LOCALS = {
    "Tensor": "at::Tensor",
    "TensorList": "TensorList",
    "int": "int64_t",
    "double": "double",
    "bool": "bool",
    "Scalar": "c10::Scalar",
    "IntList": "std::vector<int64_t>",
    "ScalarType": "at::ScalarType",
}


class StatementPrinter:
    def __init__(self, printer: CppPrinter, returns: Type):
        self.printer = printer
        self.returns = returns
        self.temporaries = 0

    def block(self, statements, depth: int = 1) -> list[str]:
        lines: list[str] = []
        for statement in statements:
            try:
                lines += self._statement(statement, depth)
            except CppError as exc:
                raise CppError(f"line {statement.lineno}: {exc}") from None
        return lines

    def _statement(self, statement: ast.stmt, depth: int) -> list[str]:
        pad = "  " * depth
        if isinstance(statement, ast.Return):
            return [f"{pad}return {self._returned(statement.value)};"]
        if isinstance(statement, ast.Assign):
            return [
                pad + line
                for line in self._assign(statement.targets[0], statement.value)
            ]
        if isinstance(statement, ast.If):
            return self._if(statement, depth)
        if isinstance(statement, ast.For):
            return self._for(statement, depth)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            return [f"{pad}{self.printer.expr(statement.value)};"]  # a check
        raise CppError(f"cannot print a {type(statement).__name__} statement")

    def _returned(self, value: ast.expr) -> str:
        if self.returns.name == "TensorList" and isinstance(
            value, ast.Tuple | ast.List
        ):
            items = []
            for e in value.elts:
                if isinstance(e, ast.Constant) and e.value is None:
                    items.append("at::Tensor()")
                else:
                    items.append(self.printer.expr(e))
            return "TensorList{" + ", ".join(items) + "}"
        if self.returns.name in ("int", "double", "bool"):
            # an optional number returned as the number (Python returns it)
            return self.printer._value(value).text
        printed = self.printer.visit(value)
        if printed.type.name == "None":
            return "at::Tensor()"
        return printed.text

    def _assign(self, target: ast.expr, value: ast.expr) -> list[str]:
        types = self.printer.types
        if isinstance(target, ast.Name):
            printed = self.printer.visit(value)
            name = target.id
            if name in types:
                return [f"{cpp_name(name)} = {printed.text};"]
            types[name] = printed.type
            return [f"{_declared(printed.type)} {cpp_name(name)} = {printed.text};"]
        printed = self.printer.visit(value)
        names = [e.id for e in target.elts]
        if printed.type.name == "tuple":
            items = printed.type.items
            if len(items) != len(names):
                raise CppError(f"unpacking {len(items)} values into {len(names)} names")
            self.temporaries += 1
            whole = f"unpacked{self.temporaries}"
            lines = [f"auto {whole} = {printed.text};"]
            for i, (name, item) in enumerate(zip(names, items)):
                lines += self._bind(name, item, f"std::get<{i}>({whole})")
            return lines
        if printed.type.name == "TensorList":
            self.temporaries += 1
            whole = f"unpacked{self.temporaries}"
            n = len(names)
            lines = [
                f"TensorList {whole} = {printed.text};",
                # Python's errors where the list is not `n` long
                (
                    f'TORCH_CHECK_VALUE({whole}.size() >= {n}, "not enough values to '
                    f'unpack (expected {n}, got ", {whole}.size(), ")");'
                ),
                (
                    f'TORCH_CHECK_VALUE({whole}.size() <= {n}, "too many values to '
                    f'unpack (expected {n})");'
                ),
            ]
            for i, name in enumerate(names):
                lines += self._bind(name, Type("Tensor"), f"{whole}[{i}]")
            return lines
        raise CppError(f"cannot unpack a {printed.type.name}")

    def _bind(self, name: str, type_: Type, text: str) -> list[str]:
        types = self.printer.types
        if name in types:
            return [f"{cpp_name(name)} = {text};"]
        types[name] = type_
        return [f"{_declared(type_)} {cpp_name(name)} = {text};"]

    def _if(self, statement: ast.If, depth: int) -> list[str]:
        pad = "  " * depth
        before = dict(self.printer.types)
        head = f"if ({self.printer._truth(statement.test, 0)}) {{"
        body = self.block(statement.body, depth + 1)
        tail: list[str] = []
        if statement.orelse:
            tail = self.block(statement.orelse, depth + 1)
        # Names first assigned inside: declared before the `if`.
        hoisted = [n for n in self.printer.types if n not in before]
        for name in hoisted:
            if self.printer.types[name].name not in _LOCALS:
                raise CppError(
                    f"`{name}` is first assigned inside an if: assign it before"
                )
        declarations = [
            f"{pad}{_declared(self.printer.types[n])} {cpp_name(n)};" for n in hoisted
        ]
        body = [u for line in body if (u := _undeclare(line, hoisted)) is not None]
        tail = [u for line in tail if (u := _undeclare(line, hoisted)) is not None]
        lines = declarations + [pad + head] + body
        if tail:
            lines += [pad + "} else {"] + tail
        return lines + [pad + "}"]

    def _for(self, statement: ast.For, depth: int) -> list[str]:
        """`for d in ints:` over a list of ints or of tensors; names first
        assigned in the body stay in it."""
        pad = "  " * depth
        items = self.printer.visit(statement.iter)
        item_type = {"IntList": "int", "TensorList": "Tensor"}.get(items.type.name)
        if item_type is None or statement.orelse:
            raise CppError("`for` runs over a list of ints or of tensors, without else")
        name = statement.target.id
        before = dict(self.printer.types)
        declared = "int64_t" if item_type == "int" else "const at::Tensor&"
        self.printer.types[name] = Type(item_type)
        body = self.block(statement.body, depth + 1)
        self.printer.types.clear()
        self.printer.types.update(before)
        head = f"{pad}for ({declared} {cpp_name(name)} : {items.text}) {{"
        return [head] + body + [pad + "}"]


def declared_local(type_: Type) -> str:
    """The C++ type a local holding a value of `type_` is declared with."""
    return _LOCALS.get(type_.name, "auto")


_declared = declared_local


def _undeclare(line: str, hoisted: list[str]) -> str | None:
    """`T x = v;` as `x = v;` for a name declared before its `if` (None for an
    inner `if`'s own `T x;`)."""
    stripped = line.lstrip()
    pad = line[: len(line) - len(stripped)]
    for name in hoisted:
        for declared in _LOCALS.values():
            if stripped == f"{declared} {cpp_name(name)};":
                return None
            prefix = f"{declared} {cpp_name(name)} = "
            if stripped.startswith(prefix):
                return f"{pad}{cpp_name(name)} = {stripped[len(prefix):]}"
    return line
