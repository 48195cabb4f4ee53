"""The derivative programs' peephole passes: sums of matrix products as one call
per term (the primal's own ops untouched, nothing fused where the result could
change), and backward ops' output masks pruned to the gradients something reads."""

from __future__ import annotations

import torch
from workloads import fresh

import dualgen.fx as dfx

aten = torch.ops.aten
torch.manual_seed(0)


def _ops(gm, names_end: str | None = None) -> list:
    return [
        n.target
        for n in gm.graph.nodes
        if n.op == "call_function" and (names_end is None or names_end in n.name)
    ]


def _jvp_matches(f, primals, tangents, gm):
    for values in (primals, tuple(fresh(p) for p in primals)):
        given = tuple(None if t is None else fresh(t) for t in tangents)
        filled = tuple(
            torch.zeros_like(p) if t is None else t for p, t in zip(values, given)
        )
        expected = torch.func.jvp(f, values, filled)
        torch.testing.assert_close(gm(*values, *given), expected)


def linear(x, w, b):
    return torch.nn.functional.linear(x, w, b).tanh()


def test_the_tangent_of_a_linear_layer_is_two_addmm():
    primals = tuple(torch.randn(s, dtype=torch.float64) for s in ((4, 3), (5, 3), (5,)))
    tangents = tuple(torch.randn_like(p) for p in primals)
    gm = dfx.jvp(linear, primals, tangents)
    tangent_ops = _ops(gm, "_t")
    assert tangent_ops.count(aten.addmm.default) == 2, gm.code
    assert aten.mm.default not in tangent_ops and aten.add.Tensor not in tangent_ops
    _jvp_matches(linear, primals, tangents, gm)


def test_the_primal_keeps_its_own_ops():
    def f(x, w, b):
        return x @ w + b  # (mm and add: not the addmm of the program's choosing)

    primals = (torch.randn(4, 3), torch.randn(3, 5), torch.randn(5))
    tangents = tuple(torch.randn_like(p) for p in primals)
    gm = dfx.jvp(f, primals, tangents)
    primal_ops = [
        n.target
        for n in gm.graph.nodes
        if n.op == "call_function" and "_t" not in n.name
    ]
    assert aten.mm.default in primal_ops and aten.add.Tensor in primal_ops
    outputs, _ = gm(*primals, *tangents)
    assert torch.equal(outputs, f(*primals))  # bit for bit


def test_a_batched_product_and_a_broadcast_term():
    def f(a, b, c):
        return torch.baddbmm(c, a, b)

    primals = (
        torch.randn(2, 3, 4, dtype=torch.float64),
        torch.randn(2, 4, 5, dtype=torch.float64),
        torch.randn(5, dtype=torch.float64),  # broadcast to (2, 3, 5)
    )
    tangents = tuple(torch.randn_like(p) for p in primals)
    gm = dfx.jvp(f, primals, tangents)
    assert aten.baddbmm.default in _ops(gm, "_t"), gm.code
    _jvp_matches(f, primals, tangents, gm)


def test_a_product_smaller_than_the_sum_is_left_alone():
    def f(x, w, y):
        return (x @ w) + y  # y (2, 4, 5) is larger than the product (4, 5)

    primals = (torch.randn(4, 3), torch.randn(3, 5), torch.randn(2, 4, 5))
    tangents = (torch.randn(4, 3), None, torch.randn(2, 4, 5))  # x_t @ w + y_t
    gm = dfx.jvp(f, primals, tangents)
    assert aten.addmm.default not in _ops(gm), gm.code
    _jvp_matches(f, primals, tangents, gm)


def test_a_product_used_twice_is_left_alone():
    def f(x, w):
        y = x @ w
        return y + y.sin()

    primals = (torch.randn(4, 3), torch.randn(3, 5))
    tangents = tuple(torch.randn_like(p) for p in primals)
    gm = dfx.jvp(f, primals, tangents)
    _jvp_matches(f, primals, tangents, gm)


def test_mixed_dtypes_are_left_alone():
    def f(x, w, b):
        return x @ w + b  # float32 product, float64 bias: the sum promotes

    primals = (
        torch.randn(4, 3),
        torch.randn(3, 5),
        torch.randn(5, dtype=torch.float64),
    )
    tangents = (torch.randn(4, 3), None, torch.randn(5, dtype=torch.float64))
    gm = dfx.jvp(f, primals, tangents)
    assert aten.addmm.default not in _ops(gm, "_t"), gm.code
    _jvp_matches(f, primals, tangents, gm)


def test_gradients_sum_products_too():
    def f(x, w):
        return (x @ w) @ w.t()  # w's gradient: the sum of two products

    primals = (
        torch.randn(4, 3, dtype=torch.float64),
        torch.randn(3, 3, dtype=torch.float64),
    )
    gm = dfx.vjp(f, primals)
    cotangent = torch.randn(4, 3, dtype=torch.float64)
    _, grads = gm(*primals, cotangent)
    _, vjp_fn = torch.func.vjp(f, *primals)
    torch.testing.assert_close(grads, vjp_fn(cotangent))


def test_gradients_nothing_reads_are_not_computed():
    """A convolution whose weight and bias are constants: its backward computes
    the input's gradient only (output_mask pruned), and the gradient is right."""
    conv = torch.nn.Conv2d(3, 4, 3).double()
    norm = torch.nn.BatchNorm2d(4).double().eval()

    def f(x):
        return norm(conv(x)).sum(dim=(2, 3))

    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    gm = dfx.vjp(f, (x,))
    masks = [
        n.args[-1]
        for n in gm.graph.nodes
        if n.op == "call_function"
        and "backward" in str(n.target)
        and isinstance(n.args[-1], list)
    ]
    assert masks and all(m == [True, False, False] for m in masks), masks
    cotangent = torch.randn(2, 4, dtype=torch.float64)
    _, grads = gm(x, cotangent)
    _, vjp_fn = torch.func.vjp(f, x)
    torch.testing.assert_close(grads, vjp_fn(cotangent))
