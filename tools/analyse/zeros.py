"""Zero-tangent specialisation of a forward formula.

A forward formula is linear in the tangents, so an absent tangent is a symbolic
zero: `a + 0 -> a`, `f(0) -> 0` for any part that reaches tangents only through
absent ones. Zeros are built (`torch.zeros_like(x_p)`) only where a present and an
absent tangent meet inside one call (`where(c, x_t, 0)`), never to be multiplied away.
The zero of an optional tensor (`Tensor? weight`) is None where the tensor is; that
of a tensor list (`Tensor[] weight`) is `fill_absent(weight_t, weight_p)`, a zero per
tensor (the absent list is None in Python, empty in C++).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from .derive import dotted, name


@dataclass(frozen=True)
class Specialised:
    expr: ast.expr | None  # None: the tangent is zero
    dropped: (
        bool  # a term was dropped, so the shape may be an input's, not the output's
    )


def specialise(
    tree: ast.expr,
    present: frozenset[str],
    absent: frozenset[str],
    optional: frozenset[str] = frozenset(),
    lists: dict[str, str] | None = None,
) -> Specialised:
    """Specialise `tree` for tangents: `present` are there, `absent` are zero;
    `optional` are the tangents of optional tensors, `lists` those of tensor lists
    (with their primal lists)."""
    state = _State(present, absent, optional, lists or {})
    expr = state.visit(tree)
    return Specialised(expr, state.dropped)


def zeros_for(tangent: str, optional: bool = False) -> ast.expr:
    primal = tangent[: -len("_t")] + "_p"
    zeros = ast.Call(func=dotted("torch.zeros_like"), args=[name(primal)], keywords=[])
    if not optional:
        return zeros
    is_none = ast.Compare(
        left=name(primal), ops=[ast.Is()], comparators=[ast.Constant(None)]
    )
    return ast.IfExp(test=is_none, body=ast.Constant(None), orelse=zeros)


class _State:
    def __init__(
        self,
        present: frozenset[str],
        absent: frozenset[str],
        optional: frozenset[str],
        lists: dict[str, str],
    ):
        self.present = present
        self.absent = absent
        self.optional = optional
        self.lists = lists
        self.dropped = False

    def mentions(self, node: ast.AST, names: frozenset[str]) -> bool:
        return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))

    def visit(self, node: ast.expr) -> ast.expr | None:
        if isinstance(node, ast.Name):
            return None if node.id in self.absent else node
        if not self.mentions(node, self.absent):
            return node
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            return self._sum(node)
        return self._generic(node)

    def _sum(self, node: ast.BinOp) -> ast.expr | None:
        left, right = self.visit(node.left), self.visit(node.right)
        if left is None and right is None:
            return None
        if right is None:
            self.dropped = True
            return left
        if left is None:
            self.dropped = True
            return (
                right
                if isinstance(node.op, ast.Add)
                else ast.UnaryOp(op=ast.USub(), operand=right)
            )
        return ast.BinOp(left=left, op=node.op, right=right)

    def _generic(self, node: ast.expr) -> ast.expr | None:
        """Zero if every part that carries a tangent is zero; else zeros are built for
        the absent ones."""
        fields = {}
        zero_parts, live_parts = 0, 0
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                new_list = []
                for item in value:
                    new, zero, live = self._part(item)
                    zero_parts += zero
                    live_parts += live
                    new_list.append(new)
                fields[field] = new_list
            else:
                new, zero, live = self._part(value)
                zero_parts += zero
                live_parts += live
                fields[field] = new
        if zero_parts and not live_parts:
            return None
        if zero_parts:
            return _Materialise(self.absent, self.optional, self.lists).visit(
                _copy(node)
            )
        return type(node)(**fields)

    def _part(self, value):
        if isinstance(value, ast.keyword):
            new, zero, live = self._part(value.value)
            return ast.keyword(arg=value.arg, value=new), zero, live
        if not isinstance(value, ast.expr):
            return value, 0, 0
        carries = self.mentions(value, self.absent | self.present)
        new = self.visit(value)
        if new is None:
            return value, 1, 0
        return new, 0, int(carries)


def _copy(node: ast.expr) -> ast.expr:
    return copy.deepcopy(node)


class _Materialise(ast.NodeTransformer):
    def __init__(
        self, absent: frozenset[str], optional: frozenset[str], lists: dict[str, str]
    ):
        self.absent = absent
        self.optional = optional
        self.lists = lists

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id not in self.absent:
            return node
        if node.id in self.lists:
            return ast.Call(
                func=name("fill_absent"),
                args=[name(node.id), name(self.lists[node.id])],
                keywords=[],
            )
        return zeros_for(node.id, node.id in self.optional)
