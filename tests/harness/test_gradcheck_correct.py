"""The gradcheck harness on correct functions: dualgen.gradcheck's verdicts equal
torch.autograd.gradcheck's (real, complex, mixed, several outputs, views and
in-place; slow and fast; with and without forward mode), also at kinks where both
fail; a single tensor and an empty input; inputs are left unmodified; and
dualgen.adjoint_check passes on them with the installed kernels.
"""

from __future__ import annotations

import pytest
import torch
from gradcheck_checks import C128, F64, FAST, rand

import dualgen

MASK = torch.tensor([[True, False, True, False], [False, False, True, True]])


def slice_assign(x):
    y = torch.zeros(5, 3, dtype=x.dtype)
    y[1:3] = x
    return y


def view_then_inplace(x):
    y = x.clone()
    y.t()[1:].mul_(2)
    return y.sin()


def two_outputs(x, w):
    return (x @ w).exp(), x.cos().sum()


CORRECT = {
    "elementwise_chain": (
        lambda x: (x.sin() * x.exp()).tanh() / (1 + x * x),
        lambda: (rand(3, 4),),
    ),
    "matmul": (
        lambda a, b: (a @ b).sigmoid(),
        lambda: (rand(2, 3), rand(3, 4, seed=1)),
    ),
    "addmm_mv_dot": (
        lambda c, a, b: torch.addmm(c, a, b).mv(b[0]).dot(c[:, 0]),
        lambda: (rand(2, 4), rand(2, 3, seed=1), rand(3, 4, seed=2)),
    ),
    "softmax": (lambda x: torch.softmax(x, 1), lambda: (rand(3, 4),)),
    "log_softmax": (lambda x: torch.log_softmax(x, 0), lambda: (rand(3, 4),)),
    "reductions": (
        lambda x: x.sum(1) * x.mean() + x.amax(0)[:3],
        lambda: (rand(3, 4),),
    ),
    "max_dim_values": (lambda x: x.max(1).values.exp(), lambda: (rand(3, 4),)),
    "max_dim_with_indices": (lambda x: x.max(0), lambda: (rand(3, 4),)),
    "transpose_mul_": (lambda x: x.clone().t().mul_(2), lambda: (rand(3, 4),)),
    "view_then_inplace": (view_then_inplace, lambda: (rand(3, 4),)),
    "slice_assign": (slice_assign, lambda: (rand(2, 3),)),
    "cat_stack": (
        lambda a, b: torch.stack([torch.cat([a, b.sin()], 0), torch.cat([b, a], 0)], 1),
        lambda: (rand(2, 3), rand(2, 3, seed=1)),
    ),
    "where": (
        lambda a, b: torch.where(MASK, a, b.exp()),
        lambda: (rand(2, 4), rand(2, 4, seed=1)),
    ),
    "pow": (
        lambda a, b: a.pow(2.5) + a.pow(b) + b.pow(2),
        lambda: (rand(3, positive=True), rand(3, seed=1)),
    ),
    "views": (
        lambda x: x.view(2, 6).permute(1, 0).unsqueeze(0).expand(2, 6, 2).select(2, 1),
        lambda: (rand(3, 4),),
    ),
    "complex_to_real": (
        lambda z: (z * z.conj()).abs() + (z.exp()).abs(),
        lambda: (rand(2, 3, dtype=C128),),
    ),
    "complex_to_complex": (lambda z: z.exp() * z, lambda: (rand(2, 3, dtype=C128),)),
    "real_times_complex": (
        lambda x, z: (x * z).sin() + x,
        lambda: (rand(2, 3), rand(2, 3, dtype=C128, seed=1)),
    ),
    "complex_matmul": (
        lambda a, b: (a @ b).tanh(),
        lambda: (rand(2, 3, dtype=C128), rand(3, 2, dtype=C128, seed=1)),
    ),
    "multiple_outputs": (two_outputs, lambda: (rand(2, 3), rand(3, 2, seed=1))),
    "non_tensor_and_constant_inputs": (
        lambda x, n, c: x * n + c.exp() * x,
        lambda: (rand(3), 3, rand(3, seed=1, requires_grad=False)),
    ),
}


@pytest.mark.parametrize("forward", [False, True], ids=["bwd", "bwd+fwd"])
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_functions_pass_like_torch(name, fast, forward):
    func, make = CORRECT[name]
    inputs = make()
    options = {"fast_mode": fast, "check_forward_ad": forward}
    assert torch.autograd.gradcheck(func, inputs, **options) is True
    assert dualgen.gradcheck(func, inputs, **options) is True


KINKS = torch.tensor([0.0, 1.0, -2.0], dtype=F64)


@pytest.mark.parametrize("forward", [False, True], ids=["bwd", "bwd+fwd"])
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize(
    "func,expected",
    [
        pytest.param(lambda x, y: x.relu() + y, False, id="relu_at_0"),
        pytest.param(lambda x, y: x.clamp(min=1.0) + y, False, id="clamp_at_bound"),
        # A tie splits the gradient, which is what central differences see.
        pytest.param(torch.maximum, True, id="maximum_tie"),
    ],
)
def test_verdicts_at_kinks_agree_with_torch(func, expected, fast, forward):
    options = {"fast_mode": fast, "check_forward_ad": forward, "raise_exception": False}
    x = KINKS.clone().requires_grad_()
    y = torch.tensor([0.0, 3.0, 1.0], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(func, (x, y), **options) is expected
    assert dualgen.gradcheck(func, (x, y), **options) is expected


def test_single_tensor_input_and_empty_input():
    assert dualgen.gradcheck(torch.sin, rand(3), check_forward_ad=True)
    empty = rand(0, 3)
    for fast in (False, True):
        assert dualgen.gradcheck(
            lambda x: x.sin().sum(0), (empty,), check_forward_ad=True, fast_mode=fast
        )


def test_inputs_are_not_modified():
    x = rand(2, 3)
    before = x.detach().clone()
    dualgen.gradcheck(lambda x: x.clone().t().mul_(2), (x,), check_forward_ad=True)
    assert torch.equal(x.detach(), before)
    assert x.grad is None


# --------------------------------------------------------------------------------------
# the adjoint check passes on the installed kernels


@pytest.mark.parametrize(
    "name",
    [
        "elementwise_chain",
        "matmul",
        "softmax",
        "transpose_mul_",
        "slice_assign",
        "cat_stack",
        "complex_to_real",
        "complex_to_complex",
        "real_times_complex",
        "multiple_outputs",
    ],
)
def test_adjoint_check_passes_on_installed_kernels(name):
    func, make = CORRECT[name]
    assert dualgen.adjoint_check(func, make()) is True
