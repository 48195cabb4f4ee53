"""`dualgen.functional`'s `hessian`, `hvp` and `vhp` against
`torch.autograd.functional` and finite differences of the gradient, in float64:
forward over reverse (`fw_mode=True`) and torch's own (`fw_mode=False`), values,
return structures, differentiable results and errors."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.functional as TF
from functional_api_checks import (  # noqa: F401 - no_level_left_open: autouse
    C128,
    F64,
    W_CAPTURED,
    X3,
    assert_same,
    assert_same_error,
    directions,
    errors_are_torchs,
    no_level_left_open,
    rand,
)

import dualgen.functional as AF

# --------------------------------------------------------------------------------------
# hessian, hvp, vhp


def scalar(x):
    return (x.sin() * x.pow(2)).sum() + x.logsumexp(-1).sum()


def scalar_of_two(x, w):
    return (w @ x).tanh().sum() + (w * x).softmax(-1)[0, 1] * x.pow(3).sum()


HESSIAN_CASES = {
    "tensor": (scalar, lambda: rand(2, 3)),
    "tuple": (scalar_of_two, lambda: (rand(3, seed=1), rand(2, 3, seed=2))),
}


def gradient(fn, inputs):
    leaves = tuple(x.detach().requires_grad_() for x in inputs)
    return torch.autograd.grad(fn(*leaves), leaves)


def hvp_by_differences(fn, inputs, v, step=1e-6):
    """Central differences of the gradient along v."""
    plus = gradient(fn, [x + step * t for x, t in zip(inputs, v)])
    minus = gradient(fn, [x - step * t for x, t in zip(inputs, v)])
    return tuple((p - m) / (2 * step) for p, m in zip(plus, minus))


def hessian_by_differences(fn, inputs):
    """Block (i, j) column by column: differences of gradient i along input j."""
    rows = []
    for i, xi in enumerate(inputs):
        row = []
        for j, xj in enumerate(inputs):
            columns = []
            for k in range(xj.numel()):
                e = [torch.zeros_like(x) for x in inputs]
                e[j].view(-1)[k] = 1
                columns.append(hvp_by_differences(fn, inputs, e)[i])
            row.append(torch.stack(columns, -1).reshape(xi.shape + xj.shape))
        rows.append(tuple(row))
    return tuple(rows)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("case", HESSIAN_CASES)
def test_hessian_forward_over_reverse_matches_torch(case, vectorize, strategy):
    fn, make = HESSIAN_CASES[case]
    inputs = make()
    ours = AF.hessian(fn, inputs, vectorize=vectorize, outer_jacobian_strategy=strategy)
    assert_same(ours, TF.hessian(fn, inputs))
    as_tuple = inputs if isinstance(inputs, tuple) else (inputs,)
    differences = hessian_by_differences(fn, as_tuple)
    flat = ours if isinstance(inputs, tuple) else ((ours,),)
    for row, expected_row in zip(flat, differences):
        for block, expected in zip(row, expected_row):
            torch.testing.assert_close(block, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "strategy, vectorize",
    [("reverse-mode", False), ("reverse-mode", True), ("forward-mode", True)],
)
def test_hessian_without_fw_mode_is_torchs(strategy, vectorize):
    fn, make = HESSIAN_CASES["tuple"]
    options = {"vectorize": vectorize, "outer_jacobian_strategy": strategy}
    ours = AF.hessian(fn, make(), fw_mode=False, **options)
    assert_same(ours, TF.hessian(fn, make(), **options))


def test_hessian_without_fw_mode_raises_as_torch_with_forward_outer_jacobian():
    options = {"outer_jacobian_strategy": "forward-mode"}
    assert_same_error(
        lambda: AF.hessian(scalar, X3, fw_mode=False, **options),
        lambda: TF.hessian(scalar, X3, **options),
    )


@pytest.mark.parametrize("vectorize", [True, False])
def test_hessian_with_create_graph_is_differentiable(vectorize):
    def gradients(api, **options):
        x = rand(3, seed=1).requires_grad_()
        w = rand(2, 3, seed=2).requires_grad_()
        (hxx, hxw), (hwx, hww) = api.hessian(
            scalar_of_two, (x, w), create_graph=True, **options
        )
        total = hxx.pow(2).sum() + hxw.sum() + (hwx * hww.sum()).sum()
        return torch.autograd.grad(total, (x, w))

    assert_same(gradients(AF, vectorize=vectorize), gradients(TF))


def test_hessian_is_detached_without_create_graph():
    x = rand(3).requires_grad_()
    for vectorize in (True, False):
        assert not AF.hessian(scalar, x, vectorize=vectorize).requires_grad


def test_hessian_of_an_unused_input_is_zero():
    def fn(x, y):
        return x.pow(3).sum()

    inputs = (rand(3), rand(2, seed=1))
    for vectorize in (True, False):
        assert_same(AF.hessian(fn, inputs, vectorize=vectorize), TF.hessian(fn, inputs))


X2 = (rand(3, seed=1), rand(3, seed=2))

HESSIAN_ERRORS = {
    "not_one_element": {"func": lambda x: x.pow(3), "inputs": X3},
    "a_tuple": {"func": lambda x: (x.pow(3).sum(),), "inputs": X3},
    "bad_strategy": {"func": scalar, "inputs": X3, "outer_jacobian_strategy": "up"},
    "inputs_a_list": {"func": scalar, "inputs": [X3]},
    "strict_output_without_grad": {
        "func": lambda x: torch.ones((), dtype=F64),
        "inputs": X3,
        "strict": True,
    },
    "strict_linear": {"func": lambda x: x.sum(), "inputs": X3, "strict": True},
    "strict_unused_input": {
        "func": lambda x, y: x.pow(3).sum(),
        "inputs": X2,
        "strict": True,
    },
    "strict_separable": {
        "func": lambda x, y: x.pow(3).sum() + y.pow(3).sum(),
        "inputs": X2,
        "strict": True,
    },
    "strict_quadratic_create_graph": {
        "func": lambda x: (x * x).sum(),
        "inputs": X3,
        "strict": True,
        "create_graph": True,
    },
    "strict_vectorized": {
        "func": scalar,
        "inputs": X3,
        "strict": True,
        "vectorize": True,
    },
    "strict_vectorized_linear": {
        "func": lambda x: x.sum(),
        "inputs": X3,
        "strict": True,
        "vectorize": True,
    },
}


test_hessian_errors_are_torchs = errors_are_torchs(HESSIAN_ERRORS, "hessian")


def test_hessian_strict_computes_a_hessian_that_depends_on_every_input():
    fn, make = HESSIAN_CASES["tuple"]
    ours = AF.hessian(fn, make(), strict=True, create_graph=True)
    assert_same(ours, TF.hessian(fn, make(), strict=True, create_graph=True))


@pytest.mark.parametrize("name", ["hvp", "vhp"])
@pytest.mark.parametrize("case", HESSIAN_CASES)
def test_hvp_and_vhp_match_torch_and_differences(case, name):
    fn, make = HESSIAN_CASES[case]
    inputs = make()
    v = directions(inputs)
    ours = getattr(AF, name)(fn, inputs, v)
    assert_same(ours, getattr(TF, name)(fn, inputs, v))
    as_tuple = (inputs, v) if isinstance(inputs, tuple) else ((inputs,), (v,))
    expected = hvp_by_differences(fn, *as_tuple)
    products = ours[1] if isinstance(inputs, tuple) else (ours[1],)
    for product, difference in zip(products, expected):
        torch.testing.assert_close(product, difference, rtol=1e-6, atol=1e-6)


def test_hvp_equals_vhp_for_a_symmetric_hessian():
    fn, make = HESSIAN_CASES["tuple"]
    inputs = make()
    v = directions(inputs)
    hvp, vhp = AF.hvp(fn, inputs, v)[1], AF.vhp(fn, inputs, v)[1]
    assert_same(hvp, vhp)
    assert_same(hvp, TF.vhp(fn, inputs, v)[1])


SKEW = torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [-1.0, 0.0, 2.0]], dtype=F64)


class SkewGradient(torch.autograd.Function):
    """A scalar whose backward gives SKEW x: a "Hessian" that is not symmetric,
    so H v (hvp) and v^T H (torch's vhp) differ."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).sum()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (SKEW @ x)


def test_vhp_is_hvp_in_fw_mode_and_torchs_without_it():
    x, v = rand(3), rand(3, seed=1)
    fn = SkewGradient.apply
    torch.testing.assert_close(AF.hvp(fn, x, v)[1], SKEW @ v)
    torch.testing.assert_close(AF.vhp(fn, x, v)[1], SKEW @ v)  # documented
    assert_same(AF.vhp(fn, x, v, fw_mode=False), TF.vhp(fn, x, v))
    torch.testing.assert_close(AF.vhp(fn, x, v, fw_mode=False)[1], SKEW.T @ v)
    assert_same(AF.hvp(fn, x, v, fw_mode=False), TF.hvp(fn, x, v))
    assert_same(AF.hessian(fn, x), TF.hessian(fn, x))


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_hvp_with_create_graph_is_differentiable_in_inputs_and_v(name):
    def gradients(api):
        x = rand(3, seed=1).requires_grad_()
        w = rand(2, 3, seed=2).requires_grad_()
        v = (rand(3, seed=3).requires_grad_(), rand(2, 3, seed=4).requires_grad_())
        out, (px, pw) = getattr(api, name)(scalar_of_two, (x, w), v, create_graph=True)
        assert out.grad_fn is not None and px.grad_fn is not None
        total = out * px.sum() + pw.pow(2).sum()
        return torch.autograd.grad(total, (x, w, *v))

    assert_same(gradients(AF), gradients(TF))


def test_hvp_is_detached_without_create_graph():
    x = rand(3).requires_grad_()
    out, product = AF.hvp(scalar, x, rand(3, seed=1).requires_grad_())
    assert not out.requires_grad and not product.requires_grad


def test_hvp_v_may_be_none_for_a_one_element_input():
    for x in (torch.tensor(0.3, dtype=F64), rand(1)):
        assert_same(AF.hvp(scalar, x), TF.hvp(scalar, x))
        assert_same(AF.vhp(scalar, x), TF.vhp(scalar, x))


def test_hvp_of_complex_inputs_matches_torch():
    def fn(z):
        return (z.sin().abs() ** 2).sum()

    z, v = rand(3, dtype=C128), rand(3, dtype=C128, seed=1)
    assert_same(AF.hvp(fn, z, v), TF.hvp(fn, z, v))
    grad_of_fn = torch.func.grad(fn)
    assert_same(AF.hvp(fn, z, v)[1], torch.func.jvp(grad_of_fn, (z,), (v,))[1])


def _captured(x, y):
    return (x * W_CAPTURED).sum() + y.pow(3).sum()


HVP_ERRORS = {
    "not_one_element": {"func": lambda x: x.pow(3), "inputs": X3, "v": X3},
    "a_tuple": {"func": lambda x: (x.pow(3).sum(),), "inputs": X3, "v": X3},
    "v_none_for_many_elements": {"func": scalar, "inputs": X3},
    "v_of_other_size": {"func": scalar, "inputs": X3, "v": rand(2)},
    "complex_v_none": {"func": lambda z: z.abs(), "inputs": torch.tensor(1j)},
    "strict_output_without_grad": {
        "func": lambda x: torch.ones((), dtype=F64),
        "inputs": X3,
        "v": X3,
        "strict": True,
    },
    "strict_unused_input": {
        "func": lambda x, y: x.sin().sum(),
        "inputs": X2,
        "v": X2,
        "strict": True,
    },
    "strict_linear": {"func": lambda x: x.sum(), "inputs": X3, "v": X3, "strict": True},
    "strict_gradient_without_tangent": {
        "func": _captured,
        "inputs": X2,
        "v": X2,
        "strict": True,
    },
    "strict_quadratic_create_graph": {
        "func": lambda x: (x * x).sum(),
        "inputs": X3,
        "v": X3,
        "strict": True,
        "create_graph": True,
    },
}


test_hvp_and_vhp_errors_are_torchs = errors_are_torchs(HVP_ERRORS, "hvp", "vhp")
