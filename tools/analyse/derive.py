"""AST rewrites that derive formulas: auto_element_wise, auto_linear, conjugation.

Pure functions from trees to new trees; inputs are never mutated.
"""

from __future__ import annotations

import ast
import copy

from ..spec.model import OperatorSchema


def name(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Load())


def method_call(receiver: ast.expr, method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(
        func=ast.Attribute(value=receiver, attr=method, ctx=ast.Load()),
        args=list(args),
        keywords=[],
    )


def dotted(path: str) -> ast.expr:
    parts = path.split(".")
    node: ast.expr = name(parts[0])
    for part in parts[1:]:
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    return node


def is_conj_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "conj"
        and not node.args
        and not node.keywords
    )


def conj(node: ast.expr) -> ast.expr:
    """The conjugate of `node`, pushed through products, sums and negation so that
    `(x_t.conj() * f.conj()).conj()` prints as `x_t * f`."""
    if is_conj_call(node):
        return node.func.value  # type: ignore[attr-defined]
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)
    ):
        return ast.BinOp(left=conj(node.left), op=node.op, right=conj(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return ast.UnaryOp(op=node.op, operand=conj(node.operand))
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node
    if isinstance(node, ast.Compare):
        return node  # booleans are real
    return method_call(node, "conj")


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.expr:
        replacement = self.mapping.get(node.id)
        return copy.deepcopy(replacement) if replacement is not None else node


def substitute(tree: ast.expr, mapping: dict[str, ast.expr]) -> ast.expr:
    """A copy of `tree` with names replaced by (copies of) expressions."""
    return _Rename(mapping).visit(copy.deepcopy(tree))


def cotangent_name(schema: OperatorSchema) -> str:
    """The VJP kernel's parameter for the outputs' gradients: `grads` (a tuple)
    for several outputs; for one, `grad`, or `grad_<output>` where an argument is
    named `grad` (`_cdist_backward(Tensor grad, ...)`), whose formulas write the
    gradient `grads[0]` or `grad_<output>`."""
    outputs = schema.output_names()
    if len(outputs) > 1:
        return "grads"
    if all(a.py_name != "grad" for a in schema.arguments):
        return "grad"
    return f"grad_{outputs[0]}"


def grads_to_name(tree: ast.expr, cotangent: str) -> ast.expr:
    """A copy of a one-output op's formula with `grads[0]` read as `cotangent`."""

    class _Rewrite(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
            if isinstance(node.value, ast.Name) and node.value.id == "grads":
                return ast.copy_location(ast.Name(cotangent, ast.Load()), node)
            return self.generic_visit(node)

    return _Rewrite().visit(copy.deepcopy(tree))


def element_wise_jvp(
    backward: ast.expr, schema: OperatorSchema, input_name: str
) -> ast.expr:
    """auto_element_wise: JVP = conj(VJP formula with grad := x_t.conj()), inputs as primals.

    Valid for element-wise ops of one input, where the Jacobian is diagonal.
    """
    cotangent = cotangent_name(schema)
    if cotangent not in ("grad", "grads"):
        backward = grads_to_name(backward, cotangent)
    mapping: dict[str, ast.expr] = {
        "grad" if cotangent == "grads" else cotangent: method_call(
            name(f"{input_name}_t"), "conj"
        )
    }
    for arg in schema.arguments:
        if arg.kind.is_tensor_like:
            mapping[arg.py_name] = name(f"{arg.name}_p")
    return conj(substitute(backward, mapping))


def op_call(schema: OperatorSchema, tangents: set[str]) -> ast.expr:
    """auto_linear: `torch.ops.aten.<op>.<overload>(...)` applied to the tangents of the
    differentiable inputs (primals of the others, plain values of non-tensors)."""
    args, keywords = [], []
    for arg in schema.arguments:
        if arg.kind.is_tensor_like:
            value = name(f"{arg.name}_t" if arg.name in tangents else f"{arg.name}_p")
        else:
            value = name(arg.py_name)
        if arg.kwarg_only:
            keywords.append(ast.keyword(arg=arg.name, value=value))
        else:
            args.append(value)
    func = dotted(f"torch.ops.{schema.namespace}.{schema.name}.{schema.overload_attr}")
    return ast.Call(func=func, args=args, keywords=keywords)


def is_name(node: ast.expr, identifier: str) -> bool:
    return isinstance(node, ast.Name) and node.id == identifier
