"""Stage 2, build: the forward (JVP) formulas of an entry.

`ForwardFormulas` is mixed into the entry builder (tools/check/build.py), whose schema,
`error`, `_formula_text` and `_parse` it uses: it gives each differentiable output
its formula or auto_* value, in the forward scope (`<arg>_p`, `<arg>_t`, the
outputs), and checks that a written formula is linear in the tangents.
"""

from __future__ import annotations

import ast

from ..spec.load import RawField
from ..spec.model import Auto, ForwardFormula, OpKind, TypeKind
from .formula import Scope


class ForwardFormulas:
    """The forward half of building an entry (see the module docstring)."""

    def forward_scope(self, differentiable: set[str]) -> Scope:
        names: set[str] = set(self.schema.output_names())
        hints: dict[str, str] = {
            "grad": "'grad' is not available in a forward formula; use <input>_t"
        }
        for arg in self.schema.arguments:
            if arg.kind.is_tensor_like:
                names.add(f"{arg.name}_p")
                hints[arg.name] = (
                    f"forward formula uses '{arg.name}'; write {arg.name}_p or {arg.name}_t"
                )
                if arg.name in differentiable:
                    names.add(f"{arg.name}_t")
                else:
                    hints[f"{arg.name}_t"] = (
                        f"'{arg.name}' is not differentiable: it has no tangent"
                    )
            else:
                names.add(arg.py_name)
                for suffix in ("_p", "_t"):
                    hints[arg.name + suffix] = (
                        f"'{arg.name}' is not a tensor: write {arg.py_name}"
                    )
        return Scope(frozenset(names), hints)

    def _forward(
        self,
        fields: list[RawField],
        diff_inputs: list[str],
        out_diff: tuple[bool, ...],
    ) -> tuple[ForwardFormula, ...]:
        differentiable = set(diff_inputs)
        tangents = {f"{n}_t" for n in differentiable}
        scope = self.forward_scope(differentiable)
        by_output = {f.key: f for f in fields}
        forward = []
        for name, diff in zip(self.schema.output_names(), out_diff):
            field = by_output.get(name)
            if not diff:
                if field is not None:
                    self.error(
                        f"output '{name}' is not differentiable and takes no forward formula",
                        field.location,
                    )
                continue
            if field is None:
                if self.schema.kind is OpKind.VIEW:
                    forward.append(
                        ForwardFormula(name, None, Auto.LINEAR, self.raw.location)
                    )
                elif differentiable:
                    self.error(
                        f"no forward formula for output '{name}'; give one, "
                        f"or auto_element_wise / auto_linear",
                        self.raw.location,
                    )
                continue
            text = self._formula_text(field)
            if text is None:
                continue
            if text.strip() in (Auto.ELEMENT_WISE.value, Auto.LINEAR.value):
                auto = Auto(text.strip())
                self._check_auto(auto, field, diff_inputs, out_diff)
                forward.append(ForwardFormula(name, None, auto, field.location))
                continue
            if self.schema.kind is OpKind.VIEW:
                self.error(
                    f"{name}: a view's tangent is the same view of its input's tangent; "
                    f"write auto_linear or leave the formula out",
                    field.location,
                )
                continue
            formula = self._parse(text, scope, field)
            if formula is None:
                continue
            problem = linearity_problem(formula.tree, tangents)
            if problem:
                self.error(
                    f"{name}: forward formula is not linear in the tangents: {problem}",
                    field.location,
                )
                continue
            forward.append(ForwardFormula(name, formula, None, field.location))
        return tuple(forward)

    def _check_auto(
        self,
        auto: Auto,
        field: RawField,
        inputs: list[str],
        out_diff: tuple[bool, ...],
    ) -> None:
        if auto is not Auto.ELEMENT_WISE:
            return
        problem = None
        if self.schema.kind is OpKind.VIEW:
            problem = "a view's tangent is the same view of its input's tangent; write auto_linear or leave the formula out"
        elif len(inputs) != 1:
            problem = f"it needs exactly one differentiable input, this entry has {len(inputs)}"
        elif self.schema.argument(inputs[0]).kind is not TypeKind.TENSOR:
            problem = "its differentiable input must be a single Tensor"
        elif sum(out_diff) != 1:
            problem = "it needs exactly one differentiable output"
        elif self.schema.kind is OpKind.INPLACE:
            problem = "in-place entries take it from their functional entry"
        if problem:
            self.error(
                f"{field.key}: auto_element_wise is not valid here: {problem}",
                field.location,
            )


def linearity_problem(tree: ast.expr, tangents: set[str]) -> str | None:
    """Why `tree` is not linear in `tangents`, or None where no rule is broken.

    Calls are trusted to be linear in their tangent arguments; operators are checked.
    """

    def has_tangent(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in tangents for n in ast.walk(node))

    if not has_tangent(tree):
        return "it uses no tangent"
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            left, right = has_tangent(node.left), has_tangent(node.right)
            op = node.op
            if isinstance(op, (ast.Mult, ast.MatMult)) and left and right:
                return "it multiplies two tangents"
            if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and right:
                return "it divides by a tangent"
            if isinstance(
                op, (ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor)
            ) and (left or right):
                return f"it applies '{ast.unparse(node)}' to a tangent"
            if isinstance(op, (ast.Add, ast.Sub)) and left != right:
                return f"'{ast.unparse(node)}' adds a term without a tangent"
        elif isinstance(node, (ast.Compare, ast.BoolOp)) and has_tangent(node):
            return "it compares tangents"
        elif (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.Not)
            and has_tangent(node)
        ):
            return "it negates a tangent logically"
        elif isinstance(node, ast.IfExp) and has_tangent(node.test):
            return "its condition depends on a tangent"
        elif isinstance(node, ast.Subscript) and has_tangent(node.slice):
            return "it indexes with a tangent"
    return None
