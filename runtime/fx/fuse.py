"""Sums of matrix products in a derivative program, as one BLAS call per term.

The tangent of a product is a sum of products: addmm's is `self_t + mat1_t @ mat2
+ mat1 @ mat2_t`, traced as an `mm` and an `add` per term. `addmm(c, a, b)`
computes `c + a @ b` in one call (the product accumulates onto `c`), so a sum of
terms of which M are products costs M ops fewer. Only the derivative's nodes are
rewritten (the primal values stay `f`'s own ops, bit for bit), and only where
nothing else changes: one dtype throughout, the products' shape the sum's, every
intermediate used once. The sum is reassociated, which moves its rounding
within an ulp per term, as any order of the terms would.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx

from . import readable

aten = torch.ops.aten

_ADD = aten.add.Tensor
_ACCUMULATING = {  # a product -> its form that adds the product onto a tensor
    aten.mm.default: aten.addmm.default,
    aten.bmm.default: aten.baddbmm.default,
    aten.mv.default: aten.addmv.default,
}


def fuse_product_sums(gm: torch.fx.GraphModule, value_nodes: dict) -> None:
    """Rewrite, in place, each sum made for a derivative that has products among
    its terms. `value_nodes` (an original node's name -> the node of its tangent
    or cotangent) follows the nodes replaced."""
    replaced = _fuse(gm, readable.derived)
    for name, node in value_nodes.items():
        value_nodes[name] = replaced.get(node, node)
    gm.recompile()


def _fuse(gm: torch.fx.GraphModule, derived: Callable[[torch.fx.Node], bool]) -> dict:
    """{replaced sum: the node now holding its value}."""
    replaced = {}
    for node in reversed(list(gm.graph.nodes)):
        if node.graph is None or not _is_sum(node, derived):
            continue  # (an inner sum already folded into an outer one is gone)
        terms = _terms(node, node, derived)
        value = _val(node)
        products = [t for t in terms if _is_product(t, value, derived)]
        if not products or len(terms) < 2:
            continue
        others = [t for t in terms if t not in products]
        with gm.graph.inserting_before(node):
            total = None
            for term in others:
                total = term if total is None else _copy(gm, _ADD, (total, term), node)
            for product in products:
                if total is None:
                    total = product
                    continue
                fused = _ACCUMULATING[product.target]
                total = _copy(gm, fused, (total, *product.args), product)
        node.replace_all_uses_with(total)
        replaced[node] = total
        gm.graph.eliminate_dead_code()
    return replaced


def _is_sum(node: torch.fx.Node, derived) -> bool:
    return (
        node.op == "call_function"
        and node.target is _ADD
        and not node.kwargs  # (no alpha)
        and derived(node)
        and all(isinstance(a, torch.fx.Node) for a in node.args)
        and all(_same_dtype(a, node) for a in node.args)
    )


def _terms(node: torch.fx.Node, root: torch.fx.Node, derived) -> list:
    """The terms of the sum at `node`, looking through sums used only there."""
    if node is not root and not (_is_sum(node, derived) and len(node.users) == 1):
        return [node]
    return [term for arg in node.args for term in _terms(arg, root, derived)]


def _is_product(node: torch.fx.Node, value, derived) -> bool:
    return (
        node.op == "call_function"
        and node.target in _ACCUMULATING
        and derived(node)
        and len(node.users) == 1
        and _val(node) is not None
        and value is not None
        and _val(node).shape == value.shape
        and _val(node).dtype == value.dtype
    )


def _same_dtype(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    va, vb = _val(a), _val(b)
    return (
        isinstance(va, torch.Tensor)
        and isinstance(vb, torch.Tensor)
        and va.dtype == vb.dtype
    )


def _val(node: torch.fx.Node):
    return node.meta.get("val")


def _copy(gm, target, args: tuple, like: torch.fx.Node) -> torch.fx.Node:
    """A new node computing `target(*args)`, marked as `like` is (its formula's
    comment, its role), with the value fake tensor make_fx would have given it."""
    node = gm.graph.call_function(target, args)
    node.meta = {k: v for k, v in like.meta.items() if k != "val"}
    if "custom" in node.meta:  # (its own: the marks are popped node by node)
        node.meta["custom"] = dict(node.meta["custom"])
    fake = [_val(a) if isinstance(a, torch.fx.Node) else a for a in args]
    node.meta["val"] = target(*fake)
    return node
