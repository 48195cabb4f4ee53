"""Each op's Taylor rule, read off its forward formulas (runtime/taylor/rules.py
says what the rules do; generated/taylor.py lists them).

- Linear: no formula reads a primal's or an output's value (their shapes and
  dtypes do not count), so the op is linear in its differentiable inputs.
- Multilinear: one output, whose formula is a sum with exactly one term per
  input of a set S, each term reading one tangent, no value of its own input,
  and giving the same tree once its tangent is renamed to its primal (M); and
  other terms reading a tangent and no value (the linear inputs). Then the op is
  M(S) plus linear terms plus a constant: a formula is a derivative, and a term
  without its own input's primal is affine in it.
- ByFormula: everything else.
"""

from __future__ import annotations

import ast
import copy

from .plan import TaylorPlan

# Attributes and methods of a tensor that read its metadata, not its values.
_METADATA = frozenset(
    (
        "shape", "dtype", "ndim", "device", "layout", "dim", "size", "numel",
        "is_complex", "is_floating_point", "is_contiguous", "stride",
    )
)  # fmt: skip


def classify(
    formulas: list[tuple[str, ast.expr]],
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    single_output: bool,
) -> TaylorPlan:
    """The Taylor rule of an op with these (output, formula tree) pairs."""
    valued = {f"{i}_p" for i in inputs} | set(outputs)
    if all(not _values_read(tree, valued) for _, tree in formulas):
        return TaylorPlan("linear")
    if len(formulas) != 1 or not single_output:
        return TaylorPlan("by_formula")
    return _multilinear(formulas[0][1], inputs, valued) or TaylorPlan("by_formula")


def _multilinear(tree: ast.expr, inputs, valued) -> TaylorPlan | None:
    forms: dict[str, str] = {}
    reads: dict[str, set[str]] = {}
    linear: list[str] = []
    for term in _terms(tree):
        tangents = [i for i in inputs if _reads(term, f"{i}_t")]
        if len(tangents) != 1:
            return None
        (own,) = tangents
        read = _values_read(term, valued)
        if not read:
            linear.append(own)
            continue
        if f"{own}_p" in read or own in forms or not read <= {f"{i}_p" for i in inputs}:
            return None
        reads[own] = read
        forms[own] = ast.dump(_canonical(_renamed(term, f"{own}_t", f"{own}_p")))
    if len(forms) < 2 or len(set(forms.values())) != 1 or set(linear) & set(forms):
        return None
    if any(
        read != {f"{i}_p" for i in forms if i != own} for own, read in reads.items()
    ):
        return None  # M reads each input of S, and only those
    return TaylorPlan("multilinear", tuple(forms), tuple(dict.fromkeys(linear)))


def _terms(tree: ast.expr) -> list[ast.expr]:
    """The terms of a top-level sum."""
    if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Add):
        return _terms(tree.left) + _terms(tree.right)
    return [tree]


def _reads(tree: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))


def _values_read(tree: ast.expr, valued: set[str]) -> set[str]:
    """The names of `valued` whose values the tree reads (not only metadata)."""
    metadata_uses = {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr in _METADATA
    }
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id in valued and id(n) not in metadata_uses
    }


def _renamed(tree: ast.expr, old: str, new: str) -> ast.expr:
    tree = copy.deepcopy(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id == old:
            n.id = new
    return tree


def _canonical(tree: ast.expr) -> ast.expr:
    """Operands of `*` in a fixed order (products of tensors commute)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            a, b = sorted((n.left, n.right), key=ast.dump)
            n.left, n.right = a, b
    return tree
