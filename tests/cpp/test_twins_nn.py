"""The C++ twins of dualgen.formulas.nn held to their Python helpers."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as py
from dualgen.generated import helpers as one_source

F64, C128 = torch.float64, torch.complex128


def same(cpp, ref, equal_nan=False):
    assert (cpp is None) == (ref is None)
    if ref is None:
        return
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=1e-12, atol=1e-12, equal_nan=equal_nan)


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def positive(*shape, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.rand(*shape, dtype=F64, generator=g) + 0.5


# --- losses --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_apply_loss_reduction(cpp_formulas, dtype, reduction):
    t = rand(3, 4, dtype=dtype)
    same(
        cpp_formulas.apply_loss_reduction(t, reduction),
        py.apply_loss_reduction(t, reduction),
    )


@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("shape", [(3, 4), (0, 2)])
def test_expand_loss_grad(cpp_formulas, dtype, reduction, shape):
    like = rand(*shape, dtype=dtype, seed=1)
    grad = rand(*shape, dtype=dtype) if reduction == 0 else rand(dtype=dtype)
    same(
        cpp_formulas.expand_loss_grad(grad, like, reduction),
        py.expand_loss_grad(grad, like, reduction),
    )


# --- views and shapes ---------------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3, 5])
def test_channel_view(cpp_formulas, ndim):
    t = rand(4)
    same(cpp_formulas.channel_view(t, ndim), py.channel_view(t, ndim))


@pytest.mark.parametrize(
    "shape, group", [((2, 6, 3), 3), ((2, 6), 2), ((0, 4, 5), 2), ((3, 4, 0, 2), 4)]
)
def test_group_shape(cpp_formulas, shape, group):
    t = torch.zeros(shape)
    assert cpp_formulas.group_shape(t, group) == one_source.group_shape(t, group)


# --- layer norm -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("normalized_shape", [[5], [4, 5], [3, 4, 5]])
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("eps", [1e-5, 0.25])
def test_layer_norm(cpp_formulas, dtype, normalized_shape, with_weight, eps):
    x = rand(3, 4, 5, dtype=dtype)
    weight = rand(*normalized_shape, dtype=dtype, seed=3) if with_weight else None
    x_t = rand(3, 4, 5, dtype=dtype, seed=4)
    args = (x_t, x, normalized_shape, eps)
    same(cpp_formulas.layer_norm_tangent(*args), py.layer_norm_tangent(*args))
    if weight is not None:
        xhat = py.layer_norm_xhat(x, normalized_shape, eps)
        weight_t = rand(*normalized_shape, dtype=dtype, seed=5)
        affine = (py.layer_norm_tangent(*args), xhat, weight, weight_t, weight_t, None)
        same(cpp_formulas.norm_affine_tangent(*affine), py.norm_affine_tangent(*affine))
    xargs = (x, normalized_shape, eps)
    same(cpp_formulas.layer_norm_xhat(*xargs), py.layer_norm_xhat(*xargs))


# --- batch norm -----------------------------------------------------------------


def batch_norm_args(dtype, ndim, with_running, with_weight):
    shape = (4, 3, 5, 2, 3)[:ndim]
    x = rand(*shape, dtype=dtype)
    running_mean = rand(3, dtype=dtype, seed=3) if with_running else None
    running_var = positive(3, seed=4).to(dtype) if with_running else None
    weight = rand(3, dtype=dtype, seed=5) if with_weight else None
    x_t = rand(*shape, dtype=dtype, seed=6)
    return x_t, x, weight, running_mean, running_var


@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("ndim", [2, 3, 5])
@pytest.mark.parametrize(
    "training, with_running", [(True, False), (True, True), (False, True)]
)
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("eps", [1e-5, 0.25])
def test_batch_norm(
    cpp_formulas, dtype, ndim, training, with_running, with_weight, eps
):
    x_t, x, w, rm, rv = batch_norm_args(dtype, ndim, with_running, with_weight)
    args = (x_t, x, rm, rv, training, eps)
    same(cpp_formulas.batch_norm_tangent(*args), py.batch_norm_tangent(*args))
    if w is not None:
        xhat = py.batch_norm_xhat(x, rm, rv, training, eps)
        affine = (py.batch_norm_tangent(*args), xhat, w, w.flip(0), w, x.dim())
        same(cpp_formulas.norm_affine_tangent(*affine), py.norm_affine_tangent(*affine))
    xargs = (x, rm, rv, training, eps)
    same(cpp_formulas.batch_norm_xhat(*xargs), py.batch_norm_xhat(*xargs))


def test_batch_norm_eval_without_running_stats_raises(cpp_formulas):
    x_t, x, _, _, _ = batch_norm_args(F64, 3, False, True)
    # Python fails on None's attributes; the twin (on the undefined tensors None
    # becomes) with ATen's RuntimeError.
    with pytest.raises((AttributeError, TypeError)):
        py.batch_norm_xhat(x, None, None, False, 1e-5)
    with pytest.raises(RuntimeError, match="undefined Tensor"):
        cpp_formulas.batch_norm_xhat(x, None, None, False, 1e-5)
    with pytest.raises(RuntimeError, match="undefined Tensor"):
        cpp_formulas.batch_norm_tangent(x_t, x, None, None, False, 1e-5)


# --- group norm -----------------------------------------------------------------


def group_norm_args(dtype, shape, group, with_weight, real_stats=False):
    x = rand(*shape, dtype=dtype)
    n, c = shape[0], shape[1]
    if real_stats:
        hxw = x[0, 0].numel() if n else 1
        _, mean, rstd = torch.ops.aten.native_group_norm(
            x, None, None, n, c, hxw, group, 1e-5
        )
    else:
        mean = rand(n, group, dtype=dtype, seed=1)
        rstd = positive(n, group, seed=2).to(dtype)
    weight = rand(c, dtype=dtype, seed=3) if with_weight else None
    return rand(*shape, dtype=dtype, seed=4), x, weight, mean, rstd


SHAPES = [((2, 6, 3), 3), ((3, 4), 2), ((2, 4, 3, 2), 1), ((2, 4, 3, 2), 4)]


@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("shape, group", SHAPES)
@pytest.mark.parametrize("with_weight", [False, True])
def test_group_norm(cpp_formulas, dtype, shape, group, with_weight):
    x_t, x, w, mean, rstd = group_norm_args(dtype, shape, group, with_weight)
    same(
        cpp_formulas.group_norm_tangent(x_t, x, mean, rstd, group),
        py.group_norm_tangent(x_t, x, mean, rstd, group),
    )
    same(
        cpp_formulas.group_norm_xhat(x, mean, rstd, group),
        py.group_norm_xhat(x, mean, rstd, group),
    )
    same(
        cpp_formulas.group_norm_mean_tangent(x_t, group),
        py.group_norm_mean_tangent(x_t, group),
    )
    same(
        cpp_formulas.group_norm_rstd_tangent(x_t, x, mean, rstd, group),
        py.group_norm_rstd_tangent(x_t, x, mean, rstd, group),
    )
    xhat = py.group_norm_xhat(x, mean, rstd, group)
    weight_t = None if w is None else w.flip(0)
    affine = (x_t, xhat, w, weight_t, weight_t, x.dim())
    same(cpp_formulas.norm_affine_tangent(*affine), py.norm_affine_tangent(*affine))


@pytest.mark.parametrize(
    "shape, group", [((2, 6, 3), 3), ((0, 4, 2), 2), ((2, 4, 0), 2)]
)
def test_group_norm_real_and_empty(cpp_formulas, shape, group):
    x_t, x, w, mean, rstd = group_norm_args(F64, shape, group, True, real_stats=True)
    for name, args in [
        ("group_norm_tangent", (x_t, x, mean, rstd, group)),
        ("group_norm_xhat", (x, mean, rstd, group)),
        ("group_norm_mean_tangent", (x_t, group)),
        ("group_norm_rstd_tangent", (x_t, x, mean, rstd, group)),
        ("norm_affine_tangent", (x_t, x, w, w.to(torch.float32), None, x.dim())),
    ]:
        same(
            getattr(cpp_formulas, name)(*args),
            getattr(py, name)(*args),
            equal_nan=True,
        )


# --- binary cross entropy --------------------------------------------------------


def probs(*shape, seed=0, edges=False):
    g = torch.Generator(DEVICE).manual_seed(seed)
    p = torch.rand(*shape, dtype=F64, generator=g) * 0.98 + 0.01
    if edges:  # where the clamps act
        p.view(-1)[:3] = torch.tensor([0.0, 1.0, 1e-50], dtype=F64)
    return p


@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("edges", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_bce_derivatives(cpp_formulas, with_weight, edges, dtype):
    self = probs(3, 4, edges=edges).to(dtype)
    target = probs(3, 4, seed=1).to(dtype)
    weight = rand(3, 4, seed=2).to(dtype) if with_weight else None
    same(
        cpp_formulas.bce_self_derivative(self, target, weight),
        py.bce_self_derivative(self, target, weight),
    )
    same(
        cpp_formulas.bce_target_derivative(self, weight),
        py.bce_target_derivative(self, weight),
    )


@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("pos_weight_shape", [None, (4,), (3, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_bce_logits_derivatives(cpp_formulas, with_weight, pos_weight_shape, dtype):
    self = (rand(3, 4) * 4).to(dtype)
    target = probs(3, 4, seed=1).to(dtype)
    weight = rand(4, seed=2).to(dtype) if with_weight else None
    pos_weight = (
        positive(*pos_weight_shape, seed=3).to(dtype) if pos_weight_shape else None
    )
    same(
        cpp_formulas.bce_logits_self_derivative(self, target, weight, pos_weight),
        py.bce_logits_self_derivative(self, target, weight, pos_weight),
    )
    same(
        cpp_formulas.bce_logits_target_derivative(self, weight, pos_weight),
        py.bce_logits_target_derivative(self, weight, pos_weight),
    )


# --- dropout --------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("train", [None, True, False])
def test_dropout_scale(cpp_formulas, p, train):
    assert cpp_formulas.dropout_scale(p, train) == py.dropout_scale(p, train)
