"""Formula trees -> Python source text.

The analysis hands over `ast` trees; `tools/emit_cpp/printer.py` prints the same
trees as ATen C++.
"""

from __future__ import annotations

import ast


class PythonPrinter:
    """Prints expression trees as Python source (black formats the file later)."""

    def expr(self, tree: ast.expr) -> str:
        return ast.unparse(ast.fix_missing_locations(tree))

    def condition(
        self, present: tuple[str, ...], absent: tuple[str, ...], any_of: tuple[str, ...]
    ) -> str:
        """`present` are there, `absent` are not, and one of `any_of` is."""
        parts = [f"{t} is not None" for t in present]
        parts += [f"{t} is None" for t in absent]
        if len(any_of) == 1:
            parts.append(f"{any_of[0]} is not None")
        elif any_of:
            parts.append("(" + " or ".join(f"{t} is not None" for t in any_of) + ")")
        return " and ".join(parts)

    def zeros_if_absent(self, tangent: str, primal: str) -> str:
        return f"torch.zeros_like({primal}) if {tangent} is None else {tangent}"
