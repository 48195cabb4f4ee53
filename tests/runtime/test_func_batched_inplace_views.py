"""Jacobians and Hessians whose batched tangents meet in-place view ops.

torch's `matmul` of a 1-d operand (`x @ W`, `F.linear(x, W)`) squeezes its result
in place (`squeeze_`); a function may call `unsqueeze_`, `transpose_`, `t_`,
`swapdims_` or `as_strided_` itself. With the basis as one batched tangent
(dualgen.func.jacfwd and hessian, dualgen.functional.jacobian and hessian with
vectorize=True), self's tangent takes the view out of place. Checked in float64,
with 1-d inputs of several sizes and both kernel backends, against torch.func,
torch.autograd.functional (reverse mode) and finite differences.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.functional as TF
import torch.func as tfunc
from devices import DEVICE
from functional_api_checks import no_level_left_open  # noqa: F401 - autouse

import dualgen.func as dfunc
import dualgen.functional as AF

F64 = torch.float64
SIZES = (1, 3, 5)


def rand(*shape, seed=0):
    gen = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(*shape, dtype=F64, generator=gen)


def _functions(n: int) -> dict:
    """Functions of a 1-d input of n elements, each reaching an in-place view op
    on a tensor whose tangent is batched (torch's own decompositions included)."""
    w, m = rand(n, 4, seed=1), rand(4, n, seed=2)
    batch = rand(2, n, 3, seed=3)
    right, right_t = rand(n, 2, seed=4), rand(n, 2, seed=5)
    return {
        "vector_matrix": lambda x: torch.tanh(x @ w),
        "matrix_vector": lambda x: torch.tanh(m @ x),
        "vector_vector": lambda x: torch.tanh(x @ x).reshape(1),
        "vector_batched_matrix": lambda x: torch.tanh(x @ batch),
        "batched_matrix_vector": lambda x: torch.tanh(batch.transpose(1, 2) @ x),
        "linear": lambda x: torch.tanh(torch.nn.functional.linear(x, m)),
        "linear_bias": lambda x: torch.nn.functional.linear(x.sin(), m, m[:, 0]),
        "mlp": lambda x: torch.tanh(torch.tanh(x @ w) @ m),
        "squeeze_": lambda x: (x.unsqueeze(0) * x.exp()).squeeze_(0),
        "squeeze_all": lambda x: (x.reshape(1, n, 1) * 2).squeeze_().sin(),
        "squeeze_dims": lambda x: (x.reshape(1, n, 1).cos()).squeeze_((0, 2)),
        "unsqueeze_": lambda x: (x * x).unsqueeze_(1) * right,
        "transpose_": lambda x: (x.unsqueeze(0) * x.sin()).transpose_(0, 1),
        "t_": lambda x: (x.unsqueeze(1) * x.exp()).t_() @ right_t,
        "swapdims_": lambda x: torch.outer(x, x.cos()).swapdims_(0, 1),
        "chained": lambda x: (x.sin() * 2).unsqueeze_(0).transpose_(0, 1).squeeze_(1),
        "view_then_write": _view_then_write,
    }


def _view_then_write(x):
    """An in-place view op on a view, then a write through it: the base's tangent
    must see the write."""
    y = x.exp() * 2
    v = y[: max(x.numel() - 1, 1)]
    v.unsqueeze_(0).mul_(x[0].sin())
    return y * x


def _scalar(f):
    return lambda x: (f(x) ** 2).sum()


CASES = [(name, n) for n in SIZES for name in _functions(n)]
IDS = [f"{name}-{n}" for name, n in CASES]
# torch.func fails there itself (squeeze_() of a tensor with one element under
# its vmap: "SmallVector unable to grow"): reverse mode is the reference.
TORCH_FUNC_FAILS = {("squeeze_all", 1)}


@pytest.mark.parametrize("name, n", CASES, ids=IDS)
def test_jacfwd_matches_torch_func_and_reverse_mode(backend, name, n):
    f, x = _functions(n)[name], rand(n, seed=10)
    expected = TF.jacobian(f, x)
    if (name, n) not in TORCH_FUNC_FAILS:
        torch.testing.assert_close(tfunc.jacfwd(f)(x), expected)
    torch.testing.assert_close(dfunc.jacfwd(f)(x), expected)
    torch.testing.assert_close(dfunc.jacfwd(f, chunk_size=2)(x), expected)


@pytest.mark.parametrize("name, n", CASES, ids=IDS)
def test_hessian_matches_torch_func_and_reverse_mode(backend, name, n):
    g, x = _scalar(_functions(n)[name]), rand(n, seed=11)
    expected = TF.hessian(g, x)
    if (name, n) not in TORCH_FUNC_FAILS:
        torch.testing.assert_close(tfunc.hessian(g)(x), expected)
    torch.testing.assert_close(dfunc.hessian(g)(x), expected)


# vectorize=True has no column-by-column fallback: the batched pass itself must
# run the in-place view ops.
@pytest.mark.parametrize("name, n", CASES, ids=IDS)
def test_functional_vectorized_jacobian(backend, name, n):
    f, x = _functions(n)[name], rand(n, seed=12)
    jacobian = AF.jacobian(f, x, strategy="forward-mode", vectorize=True)
    torch.testing.assert_close(jacobian, TF.jacobian(f, x))


@pytest.mark.parametrize("name, n", CASES, ids=IDS)
def test_functional_vectorized_hessian(backend, name, n):
    g, x = _scalar(_functions(n)[name]), rand(n, seed=12)
    torch.testing.assert_close(AF.hessian(g, x, vectorize=True), TF.hessian(g, x))


@pytest.mark.parametrize("name", ["vector_matrix", "linear", "squeeze_", "t_"])
def test_vmap_over_jvp_matches_torch_func(backend, name):
    n = 3
    f, x, tangents = _functions(n)[name], rand(n, seed=13), rand(4, n, seed=14)

    def ours(t):
        return dfunc.jvp(f, (x,), (t,))[1]

    def theirs(t):
        return tfunc.jvp(f, (x,), (t,))[1]

    torch.testing.assert_close(torch.vmap(ours)(tangents), torch.vmap(theirs)(tangents))


def _as_strided_(x):
    # Every other element of a fresh tensor, from the second on.
    y = x * x.sin()
    return y.as_strided_((x.numel() // 2,), (2,), 1).exp()


@pytest.mark.parametrize("n", (4, 6))
def test_as_strided_against_reverse_mode_and_finite_differences(backend, n):
    # torch.func.jacfwd gets this wrong (its vmap keeps the shape the tensor had
    # before as_strided_): reverse mode and finite differences are the reference.
    x = rand(n, seed=15)
    expected = TF.jacobian(_as_strided_, x)
    eps = 1e-6
    basis = torch.eye(n, dtype=F64)
    columns = [
        (_as_strided_(x + eps * e) - _as_strided_(x - eps * e)) / (2 * eps)
        for e in basis
    ]
    torch.testing.assert_close(torch.stack(columns, -1), expected)
    torch.testing.assert_close(dfunc.jacfwd(_as_strided_)(x), expected)
    vectorized = AF.jacobian(_as_strided_, x, strategy="forward-mode", vectorize=True)
    torch.testing.assert_close(vectorized, expected)
    g = _scalar(_as_strided_)
    torch.testing.assert_close(dfunc.hessian(g)(x), TF.hessian(g, x))
