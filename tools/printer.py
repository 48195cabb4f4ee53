"""Formula trees -> source text. One printer per target language; Python for now.

The analysis hands over `ast` trees; a C++ printer will sit beside this one and
read the same trees.
"""

from __future__ import annotations

import ast


class PythonPrinter:
    """Prints expression trees as Python source (black formats the file later)."""

    def expr(self, tree: ast.expr) -> str:
        return ast.unparse(ast.fix_missing_locations(tree))

    def present(self, tangents: tuple[str, ...]) -> str:
        return " and ".join(f"{t} is not None" for t in tangents)
