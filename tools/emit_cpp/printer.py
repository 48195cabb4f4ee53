"""Formula trees -> ATen C++ expressions: the C++ printer beside `PythonPrinter`.

It reads the same analysed trees the Python printer reads. A formula's names have
the C++ types `kernel.h` gives them (schema types for arguments, possibly
undefined tensors for tangents), and each call is printed as what Python would
run:

- `torch.ops.aten.X.ov(...)` as `at::_ops::X_ov::call(...)`, every argument in
  schema order (defaults filled in from the schema), so the overload is exact;
- a `torch.*` function or Tensor method that binds an aten operator as the ATen
  C++ function or method of the same name (`at::linalg_cross`, `x.sum(...)`),
  arguments in the order of the schema Python's argument parser would bind, and
  C++ overload resolution picking Scalar or Tensor overloads as Python's does;
- a helper of `dualgen.formulas` as its C++ twin, arguments in its Python
  parameter order.

Types are tracked just far enough to print Python's meaning: `is None` on a
tensor, true division of integers, tuples ATen returns, Scalars compared with
numbers. What it cannot print raises `CppError`, which the generator reports at
the entry's line: every kernel has a C++ twin or generation fails.
"""

from __future__ import annotations

import ast

import torch

from ..analyse.plan import ConditionSpelling
from ..check import admissible
from ..check.twins import Twins
from .binding import binds, given_arguments, positional_arguments, schema_name
from .type_table import (
    CppError,
    Type,
    default_literal,
    model_of,
    parameter_kind,
    return_type,
    twin_return,
)
from .values import SCALAR_TYPES, Printed, constant, cpp_name

# Tensor attributes read without a call, and how C++ reads them.
_TENSOR_ATTRIBUTES = {
    "mT": "{}.mT()", "mH": "{}.mH()", "T": "{}.t()", "H": "{}.adjoint()",
    "real": "at::real({})", "imag": "at::imag({})",
}  # fmt: skip
_ATTRIBUTES = {
    "shape": ("{}.sizes()", "IntList"),
    "dtype": ("{}.scalar_type()", "ScalarType"),
    "ndim": ("{}.dim()", "int"),
    "requires_grad": ("{}.requires_grad()", "bool"),
    "is_nested": ("{}.is_nested()", "bool"),
    **{name: (form, "Tensor") for name, form in _TENSOR_ATTRIBUTES.items()},
}
_TORCH_CONSTANTS = {
    "pi": ("c10::pi<double>", "double"),
    "e": ("c10::e<double>", "double"),
    "inf": ("std::numeric_limits<double>::infinity()", "double"),
    "nan": ("std::numeric_limits<double>::quiet_NaN()", "double"),
}
_BINARY = {  # symbol, C++ precedence
    ast.Add: ("+", 12),
    ast.Sub: ("-", 12),
    ast.Mult: ("*", 13),
    ast.Div: ("/", 13),
    ast.BitAnd: ("&", 8),
    ast.BitOr: ("|", 6),
}
_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
_NUMBERS = frozenset({"int", "double", "bool"})
_OPTIONAL_NUMBERS = {
    "Optionalint": "int",
    "Optionaldouble": "double",
    "Optionalbool": "bool",
    "OptionalScalar": "Scalar",
}


class CppPrinter:
    """Prints one kernel's formula trees; `types` maps each name in scope to its
    C++ type (`Type`)."""

    def __init__(self, types: dict[str, Type], twins: Twins):
        self.types = dict(types)
        self.twins = twins

    # -- conditions ---------------------------------------------------------

    condition = ConditionSpelling(
        "present({})", "!present({})", " || ", " && ", name=cpp_name
    ).condition

    # -- expressions --------------------------------------------------------

    def expr(self, tree: ast.expr) -> str:
        return self.visit(tree).text

    def visit(self, node: ast.expr) -> Printed:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise CppError(f"cannot print {type(node).__name__} `{_text(node)}` as C++")
        return method(node)

    def _Name(self, node: ast.Name) -> Printed:
        type_ = self.types.get(node.id)
        if type_ is None:
            raise CppError(f"`{node.id}` has no C++ declaration in this kernel")
        return Printed(cpp_name(node.id), type_)

    def _Constant(self, node: ast.Constant) -> Printed:
        return constant(node.value)

    def _UnaryOp(self, node: ast.UnaryOp) -> Printed:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            operand = self._value(node.operand)  # -x of an optional number
            return Printed(f"-{_operand(operand, 15)}", operand.type, 14)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Not):
            return Printed(f"!{_operand(operand, 15)}", Type("bool"), 14)
        raise CppError(f"cannot print `{_text(node)}` as C++")

    def _value(self, node: ast.expr) -> Printed:
        """An operand of arithmetic or a comparison: an optional number is its
        value (Python raises on None there; C++ throws bad_optional_access)."""
        printed = self.visit(node)
        inner = _OPTIONAL_NUMBERS.get(printed.type.name)
        if inner is None:
            return printed
        return Printed(f"{_operand(printed)}.value()", Type(inner))

    def _BinOp(self, node: ast.BinOp) -> Printed:
        left, right = self._value(node.left), self._value(node.right)
        tensor = left.type.is_tensor or right.type.is_tensor
        if isinstance(node.op, ast.MatMult):  # `a @ b`: torch.matmul
            return Printed(f"at::matmul({left.text}, {right.text})", Type("Tensor"))
        if isinstance(node.op, ast.Pow):
            if tensor:
                return Printed(f"at::pow({left.text}, {right.text})", Type("Tensor"))
            return Printed(
                f"std::pow({_number(left, 0)}, {_number(right, 0)})", Type("double")
            )
        if (
            isinstance(node.op, ast.FloorDiv)
            and left.type.name == right.type.name == "int"
        ):
            # Python's floor division of ints (toward -inf, as C++'s `/` is not)
            a, b = _operand(left, 15), _operand(right, 15)
            return Printed(
                f"({a} / {b} - ({a} % {b} != 0 && ({a} < 0) != ({b} < 0)))",
                Type("int"),
            )
        if type(node.op) not in _BINARY:
            raise CppError(f"cannot print the operator of `{_text(node)}` as C++")
        symbol, prec = _BINARY[type(node.op)]
        if tensor and not left.type.is_tensor:
            # A number minus or over a tensor, as Python computes it (ATen's C++
            # operators fill a tensor of the right operand's dtype instead).
            if isinstance(node.op, ast.Sub):
                return Printed(
                    f"dualgen::rsub({right.text}, {left.text})", Type("Tensor")
                )
            if isinstance(node.op, ast.Div):
                reciprocal = f"{_operand(right)}.reciprocal()"
                return Printed(
                    f"{reciprocal} * {_operand(left, 14)}", Type("Tensor"), 13
                )
        pair = f"{_operand(left, prec)} {symbol} {_operand(right, prec + 1)}"
        if tensor:
            # A Scalar on one side: ATen's Tensor-Scalar operators take it.
            return Printed(pair, Type("Tensor"), prec)
        if "Scalar" in (left.type.name, right.type.name):
            # Python arithmetic on a Scalar argument (`1 - weight`): kernel.h's
            # Scalar operators, which keep Python's int/float/complex rules.
            return Printed(pair, Type("Scalar"), prec)
        if isinstance(node.op, ast.Div):  # Python's true division of numbers
            return Printed(
                f"static_cast<double>({_number(left, 0)}) / {_number(right, 14)}",
                Type("double"),
                13,
            )
        type_ = Type(
            "double" if "double" in (left.type.name, right.type.name) else "int"
        )
        return Printed(
            f"{_number(left, prec)} {symbol} {_number(right, prec + 1)}", type_, prec
        )

    def _BoolOp(self, node: ast.BoolOp) -> Printed:
        symbol, prec = (" && ", 5) if isinstance(node.op, ast.And) else (" || ", 4)
        values = [self._truth(v, prec + 1) for v in node.values]
        return Printed(symbol.join(values), Type("bool"), prec)

    def _truth(self, node: ast.expr, prec: int) -> str:
        printed = self.visit(node)
        if printed.type.name not in ("bool", "int"):
            raise CppError(f"`{_text(node)}` is not a bool: C++ cannot test it")
        return _operand(printed, prec)

    def _Compare(self, node: ast.Compare) -> Printed:
        parts, tensor = [], False
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators):
            text, is_tensor = self._compare_one(left_node, op, right_node)
            parts.append(text)
            tensor = tensor or is_tensor
            left_node = right_node
        if tensor and len(parts) > 1:
            raise CppError(f"cannot print the chained comparison `{_text(node)}`")
        if len(parts) == 1:
            return Printed(parts[0], Type("Tensor" if tensor else "bool"), 9)
        return Printed(" && ".join(parts), Type("bool"), 5)

    def _compare_one(self, left_node, op, right_node) -> tuple[str, bool]:
        if isinstance(op, (ast.Is, ast.IsNot)):
            if not (isinstance(right_node, ast.Constant) and right_node.value is None):
                raise CppError(f"`is` compares only with None: `{_text(left_node)}`")
            test = f"present({self.expr(left_node)})"
            return (test if isinstance(op, ast.IsNot) else f"!{test}"), False
        if type(op) not in _COMPARE:
            raise CppError(f"cannot print the comparison `{_text(left_node)}` as C++")
        left, right = self._value(left_node), self._value(right_node)
        symbol = _COMPARE[type(op)]
        if left.type.is_tensor or right.type.is_tensor:
            return f"{_operand(left, 10)} {symbol} {_operand(right, 10)}", True
        if "str" in (left.type.name, right.type.name):
            return f"{_string(left)} {symbol} {_string(right)}", False
        if left.type.name == right.type.name == "ScalarType" and symbol in ("==", "!="):
            return f"{left.text} {symbol} {right.text}", False  # dtypes
        if left.type.name == right.type.name == "IntList" and symbol in ("==", "!="):
            # shapes and int lists: element-wise equality, as Python's
            left_ref, right_ref = (f"at::IntArrayRef({p.text})" for p in (left, right))
            return f"{left_ref} {symbol} {right_ref}", False
        return f"{_number(left, 10)} {symbol} {_number(right, 10)}", False

    def _IfExp(self, node: ast.IfExp) -> Printed:
        test = self._truth(node.test, 4)
        body, orelse = self.visit(node.body), self.visit(node.orelse)
        type_ = body.type if body.type.name != "None" else orelse.type
        if body.type.name == "None" or orelse.type.name == "None":
            if not type_.is_tensor:
                raise CppError(f"`{_text(node)}`: None against a {type_.name}")
            body_text = "at::Tensor()" if body.type.name == "None" else body.text
            else_text = "at::Tensor()" if orelse.type.name == "None" else orelse.text
            return Printed(f"{test} ? {body_text} : {else_text}", type_, 3)
        if body.type.is_tensor != orelse.type.is_tensor:
            raise CppError(f"`{_text(node)}`: a tensor on one side only")
        return Printed(
            f"{test} ? {_operand(body, 4)} : {_operand(orelse, 4)}", type_, 3
        )

    def _Subscript(self, node: ast.Subscript) -> Printed:
        value = self.visit(node.value)
        index = node.slice
        if value.type.is_tensor:
            return self._tensor_index(value, index, node)
        if not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
            if value.type.name == "IntList":
                i = self.visit(index)
                return Printed(f"at_index({value.text}, {i.text})", Type("int"))
            raise CppError(f"cannot print the subscript `{_text(node)}` as C++")
        i = index.value
        if value.type.name == "tuple":
            if not 0 <= i < len(value.type.items):
                raise CppError(f"`{_text(node)}`: index out of range")
            return Printed(f"std::get<{i}>({value.text})", value.type.items[i])
        if value.type.name == "IntList":
            return Printed(f"at_index({value.text}, {i})", Type("int"))
        if value.type.name == "TensorList":
            if i < 0:
                raise CppError(f"`{_text(node)}`: negative index into a tensor list")
            return Printed(f"{value.text}[{i}]", Type("Tensor"))
        raise CppError(f"cannot subscript `{_text(node)}` in C++")

    def _tensor_index(self, value: Printed, index: ast.expr, node) -> Printed:
        """`t[..., :k, i, None]` (ints, slices, `...` and None) as ATen's
        `t.index({...})`, the code Python's indexing runs."""
        items = []
        for item in index.elts if isinstance(index, ast.Tuple) else [index]:
            if isinstance(item, ast.Constant) and item.value is Ellipsis:
                items.append("at::indexing::Ellipsis")
            elif isinstance(item, ast.Constant) and item.value is None:
                items.append("at::indexing::None")
            elif isinstance(item, ast.Slice):
                bounds = []
                for bound in (item.lower, item.upper, item.step):
                    if bound is None:
                        bounds.append("std::nullopt")
                        continue
                    printed = self._value(bound)
                    if printed.type.name != "int":
                        raise CppError(f"`{_text(node)}`: a slice of ints only")
                    bounds.append(printed.text)
                while bounds and bounds[-1] == "std::nullopt":
                    bounds.pop()
                items.append(f"at::indexing::Slice({', '.join(bounds)})")
            else:
                printed = self._value(item)
                if printed.type.name != "int":
                    raise CppError(f"`{_text(node)}`: an index of ints only")
                items.append(f"int64_t{{{printed.text}}}")
        return Printed(
            f"{_operand(value)}.index({{{', '.join(items)}}})", Type("Tensor")
        )

    def _Tuple(self, node: ast.Tuple) -> Printed:
        return self._sequence(node)

    def _List(self, node: ast.List) -> Printed:
        return self._sequence(node)

    def _sequence(self, node) -> Printed:
        items = [self.visit(e) for e in node.elts]
        if all(i.type.name in ("int", "bool") for i in items):
            text = ", ".join(i.text for i in items)
            return Printed(f"std::vector<int64_t>{{{text}}}", Type("IntList"))
        if all(i.type.is_tensor or i.type.name == "None" for i in items):
            text = ", ".join(
                "at::Tensor()" if i.type.name == "None" else i.text for i in items
            )
            return Printed(f"TensorList{{{text}}}", Type("TensorList"))
        raise CppError(f"cannot print the sequence `{_text(node)}` as C++")

    def _Attribute(self, node: ast.Attribute) -> Printed:
        path = _dotted(node)
        if path and path[0] == "torch":
            return self._torch_constant(path, node)
        value = self.visit(node.value)
        if node.attr not in _ATTRIBUTES or not value.type.is_tensor:
            raise CppError(f"cannot print the attribute `{_text(node)}` as C++")
        template, type_name = _ATTRIBUTES[node.attr]
        return Printed(template.format(_operand(value)), Type(type_name))

    @staticmethod
    def _torch_constant(path: list[str], node) -> Printed:
        if len(path) == 2 and path[1] in _TORCH_CONSTANTS:
            text, type_name = _TORCH_CONSTANTS[path[1]]
            return Printed(text, Type(type_name))
        dtype = getattr(torch, path[1], None) if len(path) == 2 else None
        if isinstance(dtype, torch.dtype):
            scalar = str(dtype).removeprefix("torch.")
            return Printed(
                f"c10::ScalarType::{SCALAR_TYPES[scalar]}", Type("ScalarType")
            )
        raise CppError(f"cannot print `{_text(node)}` as C++")

    # -- calls --------------------------------------------------------------

    def _Call(self, node: ast.Call) -> Printed:
        path = _dotted(node.func)
        if path and path[:3] == ["torch", "ops", "aten"]:
            return self._aten_call(path[3:], node)
        if path and path[0] == "torch":
            return self._torch_call(".".join(path[1:]), node)
        if isinstance(node.func, ast.Name):
            return self._helper_call(node.func.id, node)
        if isinstance(node.func, ast.Attribute):
            return self._method_call(node.func, node)
        raise CppError(f"cannot print the call `{_text(node)}` as C++")

    def _aten_call(self, parts: list[str], node: ast.Call) -> Printed:
        name = parts[0]
        schemas = [
            s
            for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}")
            if admissible.in_dispatcher(s)
        ]
        if len(parts) == 2:
            overload = "" if parts[1] == "default" else parts[1]
            schemas = [s for s in schemas if s.overload_name == overload]
        else:  # a packet: the first overload that takes the call, as Python's
            schemas = [s for s in schemas if not any(a.is_out for a in s.arguments)]
        models = [model_of(s) for s in schemas]
        if len(parts) != 2:
            models = [m for m in models if binds(m, node, method=False)]
            # as Python's: a tensor goes to a Tensor parameter, a list to a list
            models = [m for m in models if self._tensors_fit(m, node)] or models
        if not models:
            raise CppError(f"`{_text(node)}`: no schema of aten::{name} takes it")
        schema = models[0]
        args = self._bound(schema, node, method=False, fill=True)
        symbol = f"{name}_{schema.overload}" if schema.overload else name
        text = f"at::_ops::{symbol}::call({', '.join(args)})"
        return Printed(text, return_type(schema))

    def _tensors_fit(self, schema, node: ast.Call) -> bool:
        """Each argument the call gives is a tensor where `schema` takes a
        Tensor, and not one where it takes something else."""
        arguments = list(schema.arguments)
        positional = positional_arguments(arguments)
        given = dict(
            zip([a.name for a in positional], given_arguments(positional, node))
        )
        for kw in node.keywords:
            given[schema_name(kw.arg, arguments)] = kw.value
        for a in arguments:
            if a.name not in given:
                continue
            printed = self.visit(given[a.name])
            wants = a.type.base == "Tensor" and a.type.suffix in ("", "?")
            if printed.type.name != "None" and printed.type.is_tensor != wants:
                return False
        return True

    def _torch_call(self, path: str, node: ast.Call) -> Printed:
        operator = admissible.binding_operator(path)
        if operator is None:
            raise CppError(f"torch.{path} is no aten operator: C++ cannot call it")
        schema = self._chosen(operator, node, method=False)
        args = self._bound(schema, node, method=False, fill=False)
        return Printed(f"at::{operator}({', '.join(args)})", return_type(schema))

    def _method_call(self, func: ast.Attribute, node: ast.Call) -> Printed:
        receiver = self.visit(func.value)
        if not receiver.type.is_tensor:
            raise CppError(f"`{_text(node)}`: a method of a {receiver.type.name}")
        name = func.attr
        if name in ("dim", "numel", "is_complex", "is_floating_point"):
            type_name = {"dim": "int", "numel": "int"}.get(name, "bool")
            return Printed(f"{_operand(receiver)}.{name}()", Type(type_name))
        if name == "size" and len(node.args) == 1 and not node.keywords:
            return Printed(
                f"{_operand(receiver)}.size({self.expr(node.args[0])})", Type("int")
            )
        if name == "to" and len(node.args) == 1 and not node.keywords:
            value = self.visit(node.args[0])
            if value.type.name == "ScalarType":
                return Printed(f"{_operand(receiver)}.to({value.text})", Type("Tensor"))
        if admissible.method_operator(name) is None:
            raise CppError(f"Tensor.{name} is no aten operator: C++ cannot call it")
        schema = self._chosen(name, node, method=True)
        args = self._bound(schema, node, method=True, fill=False)
        return Printed(
            f"{_operand(receiver)}.{name}({', '.join(args)})", return_type(schema)
        )

    def _helper_call(self, name: str, node: ast.Call) -> Printed:
        overloads = self.twins.of(name)
        if not overloads:
            raise CppError(
                f"`{name}` has no C++ twin: write it in the helpers' one source, or "
                "by hand and declare it in runtime/csrc/dualgen/formulas/twins.yaml"
            )
        # Arguments in the twin's parameter order (every overload names them
        # alike), defaults of those skipped before the last given.
        arguments = overloads[0].schema.arguments
        given = dict(zip([a.name for a in arguments], node.args))
        for kw in node.keywords:
            if kw.arg not in {a.name for a in arguments}:
                raise CppError(f"`{name}` has no parameter `{kw.arg}`")
            given[kw.arg] = kw.value
        if len(node.args) > len(arguments):
            raise CppError(f"`{name}` takes {len(arguments)} arguments")
        last = max((i for i, a in enumerate(arguments) if a.name in given), default=-1)
        args = []
        for a in arguments[: last + 1]:
            if a.name in given:
                value = self.visit(given[a.name])
                if a.type.suffix == "" and value.type.name in _OPTIONAL_NUMBERS:
                    # an `int?` passed where the twin takes an int: its value
                    value = self._value(given[a.name])
                args.append(value.text)
            elif a.default is not None:
                args.append(default_literal(a))
            else:
                raise CppError(f"`{name}` needs its argument `{a.name}`")
        missing = [a.name for a in arguments[last + 1 :] if a.default is None]
        if missing:
            raise CppError(f"`{name}` needs its argument `{missing[0]}`")
        (result,) = overloads[0].schema.returns
        type_ = twin_return(result.type)[1]
        # A kernel argument of the same name hides the helper in C++ too.
        callee = f"formulas::{name}" if name in self.types else name
        return Printed(f"{callee}({', '.join(args)})", type_)

    # -- binding arguments to a schema --------------------------------------

    def _chosen(self, operator: str, node: ast.Call, method: bool):
        schemas = [
            model_of(s)
            for s in admissible.dispatcher_schemas(operator)
            if not any(a.is_out for a in s.arguments)
        ]
        matching = [s for s in schemas if binds(s, node, method)]
        if not matching:
            raise CppError(f"`{_text(node)}`: no schema of aten::{operator} takes it")
        return matching[0]

    def _bound(self, schema, node: ast.Call, method: bool, fill: bool) -> list[str]:
        """The call's arguments in schema order; the defaults of arguments it
        skips before the last it gives (all of them with `fill`: at::_ops
        functions take every argument)."""
        arguments = [a for a in schema.arguments if not (method and a.name == "self")]
        positional = positional_arguments(arguments)
        given = dict(
            zip([a.name for a in positional], given_arguments(positional, node))
        )
        for kw in node.keywords:
            given[schema_name(kw.arg, arguments)] = kw.value
        last = max((i for i, a in enumerate(arguments) if a.name in given), default=-1)
        upto = len(arguments) if fill else last + 1
        printed = []
        for a in arguments[:upto]:
            if a.name in given:
                printed.append(self._argument(given[a.name], a, symint=fill))
            elif a.default is not None:
                printed.append(default_literal(a))
            else:
                raise CppError(f"`{_text(node)}` is missing argument '{a.name}'")
        return printed

    def _argument(self, node: ast.expr, argument, symint: bool) -> str:
        value = self.visit(node)
        wanted = parameter_kind(argument.type)
        if value.type.name == "None":
            return "std::nullopt"
        alias = argument.type.alias
        if alias is not None and alias.is_write:
            # ATen's in-place functions take `Tensor&`: the tangent expression
            # may be a temporary, alive until the end of the statement.
            return f"lvalue({value.text})"
        if wanted == "OptionalTensor" and value.type.is_tensor:
            return f"opt({value.text})"
        if symint and wanted in ("SymIntList", "OptionalSymIntList"):
            convert = (
                "symint_list" if wanted == "SymIntList" else "optional_symint_list"
            )
            if value.type.name == "int":
                return f"{convert}({{{value.text}}})"
            return f"{convert}({value.text})"
        if symint and wanted == "int" and argument.type.base == "SymInt":
            return f"c10::SymInt({value.text})"
        fixed = argument.type.suffix.removeprefix("[").removesuffix("]")
        if argument.type.base == "bool" and fixed.isdigit():  # bool[3]: std::array
            if not isinstance(node, ast.List | ast.Tuple) or len(node.elts) != int(
                fixed
            ):
                raise CppError(
                    f"`{_text(node)}`: '{argument.name}' takes a literal list of "
                    f"{fixed} bools in C++"
                )
            items = ", ".join(self.visit(e).text for e in node.elts)
            return f"std::array<bool, {fixed}>{{{items}}}"
        lists = ("IntList", "OptionalIntList", "SymIntList", "OptionalSymIntList")
        if wanted in lists and value.type.name == "int":
            return f"at::IntArrayRef{{{value.text}}}"
        return value.text


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _operand(printed: Printed, prec: int = 100) -> str:
    """`printed` as the operand of an operator of precedence `prec`."""
    return f"({printed.text})" if printed.prec < prec else printed.text


def _number(printed: Printed, prec: int) -> str:
    if printed.type.name == "Scalar":
        return f"{_operand(printed)}.to<double>()"
    if printed.type.name not in _NUMBERS:
        raise CppError(f"`{printed.text}` is a {printed.type.name}, not a number")
    return _operand(printed, prec)


def _string(printed: Printed) -> str:
    if printed.type.name == "str" and printed.text.startswith('"'):
        return f"c10::string_view({printed.text})"
    return printed.text


def _text(node: ast.AST) -> str:
    return ast.unparse(node)
