"""The C++ twins of dualgen.formulas.linalg_decompositions against the Python
helpers, on the argument kinds of their call sites in generated/jvp.py."""

from __future__ import annotations

import re

import pytest
import torch
from devices import DEVICE

from dualgen.formulas import (
    eig_tangents,
    eigh_tangents,
    hermitian_sqrt_differential,
    lstsq_b_tangent,
    lstsq_residuals_tangent,
    lstsq_self_tangent,
    pinv_tangent,
    qr_tangents,
    svd_tangents,
)

DTYPES = [torch.float64, torch.complex128]


def assert_same(cpp, py):
    """cpp and py equal: tensors, None, or sequences of them."""
    if isinstance(py, (tuple, list)):
        assert isinstance(cpp, (tuple, list))
        assert len(cpp) == len(py)
        for c, p in zip(cpp, py):
            assert_same(c, p)
        return
    assert (cpp is None) == (py is None)
    if py is not None:
        torch.testing.assert_close(cpp, py, rtol=1e-12, atol=1e-12)


def rand(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


def well_conditioned(*shape, dtype=torch.float64, seed=0):
    """A random (batched) m x n matrix with singular values in [1, 2], spread
    apart (so the SVD's gaps are well away from zero)."""
    *batch, m, n = shape
    k = min(m, n)
    U, _, Vh = torch.linalg.svd(rand(*shape, dtype=dtype, seed=seed), False)
    S = torch.linspace(2.0, 1.0, k, dtype=torch.float64).expand(*batch, k)
    return (U * S.to(dtype).unsqueeze(-2)) @ Vh


def hermitian(*shape, dtype=torch.float64, seed=0):
    """A Hermitian matrix with well-separated eigenvalues."""
    n = shape[-1]
    Q, _ = torch.linalg.qr(rand(*shape, dtype=dtype, seed=seed))
    L = torch.arange(1.0, n + 1.0, dtype=torch.float64).to(dtype)
    return (Q * L.unsqueeze(-2)) @ Q.mH


# --- svd_tangents ---------------------------------------------------------

SVD_SHAPES = [(4, 3), (3, 4), (3, 3), (2, 5, 3), (2, 3, 5)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SVD_SHAPES)
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("compute_uv", [True, False])
def test_svd_tangents(cpp_formulas, dtype, shape, full_matrices, compute_uv):
    A_p = well_conditioned(*shape, dtype=dtype, seed=1)
    A_t = rand(*shape, dtype=dtype, seed=2)
    U, S, Vh = torch.ops.aten._linalg_svd(A_p, full_matrices, compute_uv)
    args = (A_t, A_p, U, S, Vh, full_matrices, compute_uv)
    py = svd_tangents(*args)
    cpp = cpp_formulas.svd_tangents(*args)
    assert_same(cpp, py)
    assert [t.shape for t in cpp] == [U.shape, S.shape, Vh.shape]


def test_svd_tangents_complex_phase_is_used(cpp_formulas):
    """A complex tangent with an imaginary diagonal in U^H dA V moves the
    phases of U and V (the branch a real-only twin would miss)."""
    A_p = well_conditioned(4, 3, dtype=torch.complex128, seed=3)
    U, S, Vh = torch.ops.aten._linalg_svd(A_p, False, True)
    A_t = U @ torch.diag_embed(1j * torch.ones(3, dtype=torch.complex128)) @ Vh
    py = svd_tangents(A_t, A_p, U, S, Vh, False, True)
    cpp = cpp_formulas.svd_tangents(A_t, A_p, U, S, Vh, False, True)
    assert py[0].abs().max() > 0.1
    assert_same(cpp, py)


# --- eigh_tangents --------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("compute_v", [True, False])
def test_eigh_tangents(cpp_formulas, dtype, shape, compute_v):
    A_p = hermitian(*shape, dtype=dtype, seed=4)
    A_t = rand(*shape, dtype=dtype, seed=5)  # not symmetrised, as given
    L, V = torch.ops.aten._linalg_eigh(A_p, "L", compute_v)
    py = eigh_tangents(A_t, A_p, L, V, compute_v)
    cpp = cpp_formulas.eigh_tangents(A_t, A_p, L, V, compute_v)
    assert_same(cpp, py)
    assert cpp[1].shape == V.shape


# --- hermitian_sqrt_differential -------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_hermitian_sqrt_differential(cpp_formulas, dtype, shape):
    """Twin of the helper; both solve X Y + Y X = T for the square root X of a
    Hermitian positive-definite matrix (the equation, written out, is the oracle)."""
    B = rand(*shape, dtype=dtype, seed=6)
    L, V = torch.linalg.eigh(B @ B.mH + torch.eye(shape[-1], dtype=dtype))
    X = V @ torch.diag_embed(L.sqrt().to(dtype)) @ V.mH
    T = rand(*shape, dtype=dtype, seed=7)
    py = hermitian_sqrt_differential(X, T)
    assert_same(cpp_formulas.hermitian_sqrt_differential(X, T), py)
    torch.testing.assert_close(X @ py + py @ X, T, rtol=1e-10, atol=1e-10)


# --- eig_tangents ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_eig_tangents(cpp_formulas, dtype, shape):
    self_p = rand(*shape, dtype=dtype, seed=6) + 3 * torch.diag_embed(
        torch.arange(shape[-1], dtype=torch.float64).to(dtype)
    )
    self_t = rand(*shape, dtype=dtype, seed=7)
    L, V = torch.linalg.eig(self_p)
    py = eig_tangents(self_t, L, V)
    cpp = cpp_formulas.eig_tangents(self_t, L, V)
    assert_same(cpp, py)
    assert cpp[0].dtype == L.dtype and cpp[1].dtype == V.dtype


# --- qr_tangents ----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,mode",
    [
        ((4, 3), "reduced"),
        ((3, 3), "reduced"),
        ((3, 3), "complete"),
        ((3, 5), "reduced"),
        ((3, 5), "complete"),
        ((2, 5, 3), "reduced"),
        ((2, 3, 4), "reduced"),
    ],
)
def test_qr_tangents(cpp_formulas, dtype, shape, mode):
    A_p = well_conditioned(*shape, dtype=dtype, seed=8)
    A_t = rand(*shape, dtype=dtype, seed=9)
    Q, R = torch.linalg.qr(A_p, mode=mode)
    py = qr_tangents(A_t, Q, R, mode)
    cpp = cpp_formulas.qr_tangents(A_t, Q, R, mode)
    assert_same(cpp, py)


@pytest.mark.parametrize("shape,mode", [((3, 3), "r"), ((4, 3), "complete")])
def test_qr_tangents_errors(cpp_formulas, shape, mode):
    A_p = well_conditioned(*shape, seed=10)
    A_t = rand(*shape, seed=11)
    Q, R = torch.linalg.qr(A_p, mode=mode)
    with pytest.raises(RuntimeError) as py_err:
        qr_tangents(A_t, Q, R, mode)
    with pytest.raises(RuntimeError, match=re.escape(str(py_err.value))):
        cpp_formulas.qr_tangents(A_t, Q, R, mode)


# --- pinv_tangent ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
def test_pinv_tangent(cpp_formulas, dtype, shape):
    A_p = well_conditioned(*shape, dtype=dtype, seed=12)
    A_t = rand(*shape, dtype=dtype, seed=13)
    result = torch.ops.aten.linalg_pinv.atol_rtol_tensor(A_p)
    py = pinv_tangent(A_t, A_p, result)
    cpp = cpp_formulas.pinv_tangent(A_t, A_p, result)
    assert_same(cpp, py)


# --- lstsq ----------------------------------------------------------------

# (self shape, b shape): matrix and vector right sides, batched, m > n and m < n.
LSTSQ_SHAPES = [
    ((5, 3), (5, 2)),
    ((5, 3), (5,)),
    ((2, 5, 3), (2, 5, 2)),
    ((2, 5, 3), (2, 5)),
    ((3, 5), (3, 2)),
    ((3, 5), (3,)),
]


def lstsq_inputs(self_shape, b_shape, dtype, seed):
    self_p = well_conditioned(*self_shape, dtype=dtype, seed=seed)
    b_p = rand(*b_shape, dtype=dtype, seed=seed + 1)
    self_t = rand(*self_shape, dtype=dtype, seed=seed + 2)
    b_t = rand(*b_shape, dtype=dtype, seed=seed + 3)
    return self_p, b_p, self_t, b_t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("self_shape,b_shape", LSTSQ_SHAPES)
def test_lstsq_self_and_b_tangent(cpp_formulas, dtype, self_shape, b_shape):
    self_p, b_p, self_t, b_t = lstsq_inputs(self_shape, b_shape, dtype, 20)
    py = lstsq_self_tangent(self_t, self_p, b_p)
    cpp = cpp_formulas.lstsq_self_tangent(self_t, self_p, b_p)
    assert_same(cpp, py)
    solution = torch.linalg.lstsq(self_p, b_p).solution
    assert cpp.shape == solution.shape
    py = lstsq_b_tangent(b_t, self_p)
    cpp = cpp_formulas.lstsq_b_tangent(b_t, self_p)
    assert_same(cpp, py)
    assert cpp.shape == solution.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("self_shape,b_shape", LSTSQ_SHAPES)
@pytest.mark.parametrize("driver", ["gelsd", "gelsy"])
@pytest.mark.parametrize("tangents", ["both", "self", "b"])
def test_lstsq_residuals_tangent(
    cpp_formulas, dtype, self_shape, b_shape, driver, tangents
):
    self_p, b_p, self_t, b_t = lstsq_inputs(self_shape, b_shape, dtype, 30)
    # the call sites pass zeros for the absent tangent
    if tangents == "self":
        b_t = torch.zeros_like(b_p)
    elif tangents == "b":
        self_t = torch.zeros_like(self_p)
    solution, residuals, _, _ = torch.linalg.lstsq(self_p, b_p, driver=driver)
    has_residuals = driver == "gelsd" and self_shape[-2] > self_shape[-1]
    assert bool(residuals.numel()) == has_residuals
    args = (self_t, b_t, self_p, b_p, solution, residuals)
    py = lstsq_residuals_tangent(*args)
    cpp = cpp_formulas.lstsq_residuals_tangent(*args)
    assert_same(cpp, py)
    assert cpp.shape == residuals.shape
    if has_residuals:
        assert py.abs().max() > 0
