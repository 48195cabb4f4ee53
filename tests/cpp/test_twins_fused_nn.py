"""The C++ twins of dualgen.formulas.fused_nn held to their Python helpers."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as py

F32, F64 = torch.float32, torch.float64


def same(cpp, ref):
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=1e-12, atol=1e-12)


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


# --- cdist ----------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 1.5, 0.5, float("inf")])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_cdist_weights(cpp_formulas, p, dtype):
    x1, x2 = rand(2, 3, 4, dtype=dtype), rand(2, 5, 4, dtype=dtype, seed=1)
    x2[0, 0] = x1[0, 0]  # a zero distance
    dist = torch.cdist(x1, x2, p=p)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    for name in [
        "cdist_weights",
        "cdist_weights_diff_derivative",
        "cdist_weights_dist_derivative",
    ]:
        same(
            getattr(cpp_formulas, name)(diff, p, dist), getattr(py, name)(diff, p, dist)
        )


# --- CTC loss -------------------------------------------------------------------


@pytest.mark.parametrize("as_tensors", [False, True])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_log_probs_grad(cpp_formulas, as_tensors, zero_infinity):
    log_probs = rand(6, 3, 4).log_softmax(-1)
    targets = torch.tensor([[1, 2, 2], [1, 3, 0], [2, 2, 2]])
    input_lengths, target_lengths = [6, 5, 4], [3, 2, 3]  # the last is impossible
    if as_tensors:
        input_lengths = torch.tensor(input_lengths)
        target_lengths = torch.tensor(target_lengths)
    nll, log_alpha = torch.ops.aten._ctc_loss(
        log_probs, targets, input_lengths, target_lengths, 0, zero_infinity
    )
    args = (
        rand(3, seed=2),
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        nll,
        log_alpha,
        0,
        zero_infinity,
    )
    cpp, ref = cpp_formulas.ctc_loss_log_probs_grad(*args), py.ctc_loss_log_probs_grad(
        *args
    )
    assert cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=1e-12, atol=1e-12, equal_nan=True)


# --- grid sampling --------------------------------------------------------------

MODES = [(i, p, ac) for i in (0, 1, 2) for p in (0, 1, 2) for ac in (False, True)]


def grid_args(nd, dtype):
    if nd == 2:
        x, grid = rand(2, 3, 4, 5, dtype=dtype), rand(2, 3, 2, 2, dtype=dtype, seed=1)
    else:
        x, grid = rand(2, 2, 3, 4, 3, dtype=dtype), rand(
            2, 2, 3, 2, 3, dtype=dtype, seed=1
        )
    return x, grid * 1.3, rand(*grid.shape, dtype=dtype, seed=2)


KINDS = ["tangent_adjoint", "second"]  # beside "tangent", which reads no grad_output


def same_derivative(cpp_formulas, kind, *args):
    same(
        cpp_formulas.grid_sampler_grid_derivative(kind, *args),
        py.grid_sampler_grid_derivative(kind, *args),
    )


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_grid_sampler_grid_derivative(cpp_formulas, nd, mode, dtype):
    if nd == 3 and mode[0] == 2:
        pytest.skip("no bicubic in 3-d")
    x, grid, grid_t = grid_args(nd, dtype)
    out = py.grid_sampler_grid_derivative("tangent", None, x, grid, grid_t, *mode)
    same_derivative(cpp_formulas, "tangent", None, x, grid, grid_t, *mode)
    go = rand(*out.shape, dtype=dtype, seed=3)
    for kind in KINDS:
        same_derivative(cpp_formulas, kind, go, x, grid, grid_t, *mode)


def test_grid_sampler_grid_derivative_empty(cpp_formulas):
    x, grid = rand(2, 3, 4, 5), rand(2, 0, 3, 2)
    out = py.grid_sampler_grid_derivative("tangent", None, x, grid, grid, 0, 0, False)
    assert out.shape == (2, 3, 0, 3)
    same_derivative(cpp_formulas, "tangent", None, x, grid, grid, 0, 0, False)
    for kind in KINDS:
        same_derivative(cpp_formulas, kind, out, x, grid, grid, 0, 0, False)


def test_grid_sampler_grid_derivative_unknown_kind(cpp_formulas):
    x, grid, grid_t = grid_args(2, F64)
    args = ("tangents", None, x, grid, grid_t, 0, 0, False)
    message = "kind is one of tangent, tangent_adjoint, second, got 'tangents'"
    with pytest.raises(ValueError, match=message):
        py.grid_sampler_grid_derivative(*args)
    with pytest.raises(ValueError, match=message):
        cpp_formulas.grid_sampler_grid_derivative(*args)
