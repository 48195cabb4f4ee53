"""The C++ twins of dualgen.formulas.linalg_solves held to their Python helpers."""

from __future__ import annotations

import itertools

import pytest
import torch
import twin_checks
from twin_checks import gen, randn, same, same_error, tangents

from dualgen import formulas as py

DTYPES = [torch.float64, torch.complex128]


def well_conditioned(*shape, dtype=torch.float64, g=None):
    n = shape[-1]
    return randn(*shape, dtype=dtype, g=g) + n * torch.eye(n, dtype=dtype)


def hermitian_pd(*shape, dtype=torch.float64, g=None):
    x = randn(*shape, dtype=dtype, g=g)
    n = shape[-1]
    return x.matmul(x.mH) + n * torch.eye(n, dtype=dtype)


def both(cpp_formulas, name, *args):
    """The twin's result, once it agrees with the helper's."""
    return twin_checks.both(cpp_formulas, name, *args)[0]


# --- triangular_part, side_matmul -------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unitri", [True, False])
def test_triangular_part(cpp_formulas, dtype, upper, unitri):
    t = randn(2, 4, 3, dtype=dtype, g=gen(1))
    out = both(cpp_formulas, "triangular_part", t, upper, unitri)
    assert (out != 0).any()


@pytest.mark.parametrize("upper", [True, False])
def test_triangular_part_default(cpp_formulas, upper):
    t = randn(5, 5, g=gen(2))
    both(cpp_formulas, "triangular_part", t, upper)
    same(cpp_formulas.triangular_part(t, upper=upper), py.triangular_part(t, upper))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
def test_side_matmul(cpp_formulas, dtype, left):
    g = gen(3)
    m, x = randn(2, 3, 3, dtype=dtype, g=g), randn(2, 3, 3, dtype=dtype, g=g)
    out = both(cpp_formulas, "side_matmul", m, x, left)
    assert not torch.allclose(out, cpp_formulas.side_matmul(m, x, not left))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unitri", [True, False])
def test_solve_triangular_kernel_expression(cpp_formulas, dtype, left, upper, unitri):
    # linalg_solve_triangular's kernel: side_matmul(triangular_part(dA), X, left).
    g = gen(4)
    A_t, X = randn(2, 4, 4, dtype=dtype, g=g), randn(2, 4, 4, dtype=dtype, g=g)
    ref = py.side_matmul(py.triangular_part(A_t, upper, unitri), X, left)
    out = cpp_formulas.side_matmul(
        cpp_formulas.triangular_part(A_t, upper, unitri), X, left
    )
    same(out, ref)


# --- linalg_solve_tangent ----------------------------------------------------


def _solve_case(A_shape, B_shape, dtype, left, seed):
    g = gen(seed)
    A = well_conditioned(*A_shape, dtype=dtype, g=g)
    B = randn(*B_shape, dtype=dtype, g=g)
    result, LU, pivots, _ = torch.ops.aten._linalg_solve_ex(A, B, left=left)
    return A, B, result, LU, pivots, g


SOLVE_SHAPES = [
    ((4, 4), (4, 2)),  # matrix rhs
    ((4, 4), (4,)),  # 1-d vector rhs
    ((3, 4, 4), (3, 4)),  # batch of vectors
    ((3, 4, 4), (4, 2)),  # broadcast rhs
    ((3, 4, 4), (3, 4, 4)),  # square rhs
]


# linalg.solve takes no vector right-hand side with left=False.
SOLVE_CASES = [
    (shapes, left)
    for shapes in SOLVE_SHAPES
    for left in (True, False)
    if left or len(shapes[1]) != len(shapes[0]) - 1
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,left", SOLVE_CASES)
@pytest.mark.parametrize("absent", [None, "A", "B"])
def test_linalg_solve_tangent(cpp_formulas, dtype, shapes, left, absent):
    A_shape, B_shape = shapes
    if not left and len(B_shape) >= 2 and B_shape[-2:] == (4, 2):
        B_shape = B_shape[:-2] + (2, 4)
    A, B, result, _, _, g = _solve_case(A_shape, B_shape, dtype, left, 5)
    A_t, B_t = tangents(g, absent, A=A, B=B)
    out = both(cpp_formulas, "linalg_solve_tangent", A_t, B_t, A, B, result, left)
    assert out.shape == result.shape


def test_linalg_solve_tangent_error(cpp_formulas):
    A, B, result, _, _, _ = _solve_case((4, 4), (4, 2), torch.float64, True, 6)
    same_error(
        cpp_formulas,
        "linalg_solve_tangent",
        randn(3, 3),
        randn(4, 2),
        A,
        B,
        result,
        True,
    )


# --- triangular_solve_tangent -----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "upper,transpose,unitri", list(itertools.product([True, False], repeat=3))
)
@pytest.mark.parametrize("absent", [None, "B", "A"])
@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
def test_triangular_solve_tangent(
    cpp_formulas, dtype, upper, transpose, unitri, absent
):
    g = gen(7)
    A = well_conditioned(2, 4, 4, dtype=dtype, g=g)
    B = randn(2, 4, 3, dtype=dtype, g=g)
    solution, _ = torch.triangular_solve(B, A, upper, transpose, unitri)
    B_t, A_t = tangents(g, absent, B=B, A=A)
    both(
        cpp_formulas,
        "triangular_solve_tangent",
        B_t,
        A_t,
        A,
        solution,
        upper,
        transpose,
        unitri,
    )


# --- Cholesky ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_cholesky_tangent(cpp_formulas, dtype, upper, batch):
    g = gen(8)
    A = hermitian_pd(*batch, 4, 4, dtype=dtype, g=g)
    L = torch.linalg.cholesky(A, upper=upper)
    A_t = randn(*batch, 4, 4, dtype=dtype, g=g)
    both(cpp_formulas, "cholesky_tangent", A_t + A_t.mH, L, upper)
    both(cpp_formulas, "cholesky_tangent", A_t, L, upper)


def test_cholesky_tangent_error(cpp_formulas):
    L = torch.linalg.cholesky(hermitian_pd(4, 4, g=gen(9)))
    same_error(cpp_formulas, "cholesky_tangent", randn(3, 3), L, False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("absent", [None, "B", "L"])
def test_cholesky_solve_tangent(cpp_formulas, dtype, upper, absent):
    g = gen(10)
    L = torch.linalg.cholesky(hermitian_pd(2, 4, 4, dtype=dtype, g=g), upper=upper)
    L = L + randn(*L.shape, dtype=dtype, g=g)  # the other triangle is not read
    B = randn(2, 4, 3, dtype=dtype, g=g)
    result = torch.cholesky_solve(B, L, upper)
    B_t, L_t = tangents(g, absent, B=B, L=L)
    both(cpp_formulas, "cholesky_solve_tangent", B_t, L_t, L, result, upper)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_inverse_tangent(cpp_formulas, dtype, upper, batch):
    g = gen(11)
    L = torch.linalg.cholesky(hermitian_pd(*batch, 4, 4, dtype=dtype, g=g), upper=upper)
    result = torch.cholesky_inverse(L, upper)
    L_t = randn(*L.shape, dtype=dtype, g=g)
    both(cpp_formulas, "cholesky_inverse_tangent", L_t, L, result, upper)


# --- det, slogdet -----------------------------------------------------------


def _det_inputs(dtype, contiguous, singular, seed):
    g = gen(seed)
    A = well_conditioned(3, 4, 4, dtype=dtype, g=g)
    if singular:
        # An exact zero row and column in one batch element: an exact zero
        # pivot in its LU (of A or of A^T).
        A[1, 2, :] = 0
        A[1, :, 2] = 0
    if not contiguous:
        A = A.mT
    return A, randn(3, 4, 4, dtype=dtype, g=g)


@pytest.mark.parametrize("dtype", DTYPES + [torch.float32])
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("singular", [False, True])
def test_det_tangent(cpp_formulas, dtype, contiguous, singular):
    A, A_t = _det_inputs(dtype, contiguous, singular, 12)
    assert A.is_contiguous() == contiguous
    det, _, _ = torch.ops.aten._linalg_det(A)
    if singular:
        assert det[1] == 0
    out = both(cpp_formulas, "det_tangent", A_t, A, det)
    if singular:
        assert out[1] != 0  # the adjugate limit, not det * ... = 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_det_lu_tangent(cpp_formulas, dtype, contiguous):
    A, A_t = _det_inputs(dtype, contiguous, False, 14)
    _, LU, pivots = torch.ops.aten._linalg_det(A)
    both(cpp_formulas, "det_lu_tangent", A_t, A, LU, pivots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_slogdet_tangents(cpp_formulas, dtype, contiguous):
    A, A_t = _det_inputs(dtype, contiguous, False, 13)
    sign, _, _, _ = torch.ops.aten._linalg_slogdet(A)
    out = both(cpp_formulas, "slogdet_tangents", A_t, A, sign)
    assert isinstance(out, (tuple, list)) and len(out) == 2
    assert out[0].dtype == sign.dtype
    if not dtype.is_complex:
        assert (out[0] == 0).all()


def test_det_tangent_error(cpp_formulas):
    A, _ = _det_inputs(torch.float64, True, False, 14)
    det, _, _ = torch.ops.aten._linalg_det(A)
    same_error(cpp_formulas, "det_tangent", randn(3, 5, 5), A, det)


# --- LU ---------------------------------------------------------------------

LU_SHAPES = [(4, 4), (3, 5), (5, 3), (2, 4, 4), (2, 3, 5), (2, 5, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_tangents(cpp_formulas, dtype, shape):
    g = gen(15)
    A = randn(*shape, dtype=dtype, g=g)
    P, L, U = torch.linalg.lu(A)
    A_t = randn(*shape, dtype=dtype, g=g)
    out = both(cpp_formulas, "lu_tangents", A_t, P, L, U)
    assert isinstance(out, (tuple, list)) and len(out) == 2
    assert out[0].shape == L.shape and out[1].shape == U.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_unpack_tangents(cpp_formulas, dtype, shape):
    LU_t = randn(*shape, dtype=dtype, g=gen(16))
    out = both(cpp_formulas, "lu_unpack_tangents", LU_t)
    assert isinstance(out, (tuple, list)) and len(out) == 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_tangent(cpp_formulas, dtype, shape):
    g = gen(17)
    A = randn(*shape, dtype=dtype, g=g)
    LU, pivots = torch.linalg.lu_factor(A)
    A_t = randn(*shape, dtype=dtype, g=g)
    out = both(cpp_formulas, "lu_factor_tangent", A_t, LU, pivots)
    assert out.shape == LU.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
@pytest.mark.parametrize("absent", [None, "LU", "B"])
def test_lu_solve_tangent(cpp_formulas, dtype, left, adjoint, absent):
    g = gen(18)
    A = well_conditioned(2, 4, 4, dtype=dtype, g=g)
    LU, pivots = torch.linalg.lu_factor(A)
    B = randn(2, 4, 3, dtype=dtype, g=g) if left else randn(2, 3, 4, dtype=dtype, g=g)
    result = torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
    LU_t, B_t = tangents(g, absent, LU=LU, B=B)
    both(
        cpp_formulas,
        "lu_solve_tangent",
        LU_t,
        B_t,
        LU,
        pivots,
        result,
        left,
        adjoint,
    )


def test_lu_solve_tangent_error(cpp_formulas):
    g = gen(19)
    A = well_conditioned(4, 4, g=g)
    LU, pivots = torch.linalg.lu_factor(A)
    B = randn(4, 3, g=g)
    result = torch.linalg.lu_solve(LU, pivots, B)
    same_error(
        cpp_formulas,
        "lu_solve_tangent",
        randn(4, 4, g=g),
        randn(5, 3, g=g),
        LU,
        pivots,
        result,
        True,
        False,
    )


# --- matrix exponential, Householder product -------------------------------


@pytest.mark.parametrize(
    "A_dtype,E_dtype",
    [
        (torch.float64, torch.float64),
        (torch.complex128, torch.complex128),
        (torch.complex128, torch.float64),
        (torch.float64, torch.complex128),
    ],
)
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_matrix_exp_differential(cpp_formulas, A_dtype, E_dtype, adjoint, batch):
    g = gen(20)
    A = 0.5 * randn(*batch, 3, 3, dtype=A_dtype, g=g)
    E = randn(*batch, 3, 3, dtype=E_dtype, g=g)
    out = both(cpp_formulas, "matrix_exp_differential", A, E, adjoint)
    assert out.shape == A.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,k", [((4, 4), 4), ((5, 3), 3), ((5, 3), 2), ((2, 4, 3), 3)]
)
@pytest.mark.parametrize("absent", [None, "input", "tau"])
def test_householder_product_tangent(cpp_formulas, dtype, shape, k, absent):
    g = gen(21)
    input = randn(*shape, dtype=dtype, g=g)
    tau = randn(*shape[:-2], k, dtype=dtype, g=g)
    input_t, tau_t = tangents(g, absent, input=input, tau=tau)
    out = both(cpp_formulas, "householder_product_tangent", input_t, tau_t, input, tau)
    assert out.shape == input.shape


def test_householder_product_tangent_error(cpp_formulas):
    g = gen(22)
    input, tau = randn(4, 3, g=g), randn(3, g=g)
    same_error(
        cpp_formulas,
        "householder_product_tangent",
        randn(5, 3, g=g),
        randn(3, g=g),
        input,
        tau,
    )
