"""Formula trees -> Python source text.

The analysis hands over `ast` trees; `tools/emit_cpp/printer.py` prints the same
trees as ATen C++.
"""

from __future__ import annotations

import ast

from ..analyse.plan import ConditionSpelling


class PythonPrinter:
    """Prints expression trees as Python source (black formats the file later)."""

    def expr(self, tree: ast.expr) -> str:
        return ast.unparse(ast.fix_missing_locations(tree))

    condition = ConditionSpelling(
        "{} is not None", "{} is None", " or ", " and "
    ).condition

    def zeros_if_absent(self, tangent: str, primal: str) -> str:
        # A primal torch passes undefined (a backward op's attn_bias) keeps None.
        return (
            f"torch.zeros_like({primal}) "
            f"if {tangent} is None and {primal} is not None else {tangent}"
        )
