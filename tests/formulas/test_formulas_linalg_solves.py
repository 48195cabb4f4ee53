"""The helpers of dualgen.formulas.linalg_solves (solves, Cholesky, determinants, LU, matrix
exponential, Householder products), against torch.func.jvp / torch.autograd.grad of
the op they serve, or central finite differences where native AD does not follow
the op (triangular_solve, cholesky_solve, cholesky_inverse read one triangle of a
factor); float64 and complex128."""

from __future__ import annotations

import pytest
import torch
from formula_checks import DTYPES, C, R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def finite_difference(fn, primals, tangents, eps=1e-6):
    plus = fn(*[p + eps * t for p, t in zip(primals, tangents)])
    minus = fn(*[p - eps * t for p, t in zip(primals, tangents)])
    return (plus - minus) / (2 * eps)


def inner(a, b):
    return (a.conj() * b).real.sum()


def invertible(*shape, dtype):
    n = shape[-1]
    return torch.randn(*shape, dtype=dtype) + n * torch.eye(n, dtype=dtype)


def spd(*shape, dtype):
    a = torch.randn(*shape, dtype=dtype)
    return a @ a.mH / shape[-1] + torch.eye(shape[-1], dtype=dtype)


# ---------------------------------------------------------------- small pieces


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_part_keeps_the_triangle_an_op_reads(upper, unitriangular):
    a = torch.randn(2, 3, 3, dtype=R)
    expected = a.triu(int(unitriangular)) if upper else a.tril(-int(unitriangular))
    close(F.triangular_part(a, upper, unitriangular), expected)


def test_side_matmul_puts_the_matrix_on_its_side():
    m, x = torch.randn(3, 3, dtype=C), torch.randn(3, 3, dtype=C)
    close(F.side_matmul(m, x, True), m @ x)
    close(F.side_matmul(m, x, False), x @ m)


# ---------------------------------------------------------------- solves


SOLVE_CASES = [
    ((3, 3), (3, 2), True),
    ((2, 3, 3), (3, 2), True),
    ((3, 3), (2, 3, 4), True),
    ((2, 3, 3), (3,), True),
    ((2, 3, 3), (2, 3), True),
    ((3, 3), (2, 3), False),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape, left", SOLVE_CASES)
def test_linalg_solve_tangent_and_grads_match_autograd(a_shape, b_shape, left, dtype):
    A, B = invertible(*a_shape, dtype=dtype), torch.randn(b_shape, dtype=dtype)
    X, LU, pivots, _ = torch.ops.aten._linalg_solve_ex(A, B, left=left)

    def fn(a, b):
        return torch.linalg.solve(a, b, left=left)

    At, Bt = torch.randn_like(A), torch.randn_like(B)
    tangent = F.linalg_solve_tangent(At, Bt, A, B, X, left)
    close(tangent, jvp(fn, [A, B], [At, Bt]))
    g = torch.randn_like(X)
    for got, expected in zip(
        F.linalg_solve_grads(g, A, B, X, LU, pivots, left), vjp(fn, [A, B], g)
    ):
        close(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular_grads_match_autograd(upper, left, unitriangular, dtype):
    A = invertible(2, 3, 3, dtype=dtype)
    B = torch.randn(3, 2, dtype=dtype) if left else torch.randn(2, 3, dtype=dtype)

    def fn(a, b):
        return torch.linalg.solve_triangular(
            a, b, upper=upper, left=left, unitriangular=unitriangular
        )

    X = fn(A, B)
    g = torch.randn_like(X)
    got = F.solve_triangular_grads(g, A, B, X, upper, left, unitriangular)
    for got_one, expected in zip(got, vjp(fn, [A, B], g)):
        close(got_one, expected)
    # and the forward formula of the entry, which reads dA's triangle only
    At, Bt = torch.randn_like(A), torch.randn_like(B)
    dA = F.triangular_part(At, upper, unitriangular)
    tangent = torch.linalg.solve_triangular(
        A,
        Bt - F.side_matmul(dA, X, left),
        upper=upper,
        left=left,
        unitriangular=unitriangular,
    )
    close(tangent, finite_difference(fn, [A, B], [At, Bt]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_solve_tangent_and_grads(upper, transpose, unitriangular, dtype):
    A, B = invertible(2, 3, 3, dtype=dtype), torch.randn(3, 2, dtype=dtype)

    def fn(b, a):
        return torch.triangular_solve(b, a, upper, transpose, unitriangular)[0]

    X = fn(B, A)
    Bt, At = torch.randn(2, 3, 2, dtype=dtype), torch.randn_like(A)
    Bb = B.expand(2, 3, 2)
    tangent = F.triangular_solve_tangent(Bt, At, A, X, upper, transpose, unitriangular)
    close(tangent, finite_difference(fn, [Bb, A], [Bt, At]))
    # the gradients: the adjoint of the tangent, plus the cloned coefficient's own
    g, g_coefficient = torch.randn_like(X), torch.randn_like(A)
    gB, gA = F.triangular_solve_grads(
        g, g_coefficient, Bb, A, X, upper, transpose, unitriangular
    )
    close(inner(g, tangent) + inner(g_coefficient, At), inner(gB, Bt) + inner(gA, At))
    # where native's forward AD applies (triangular dA, no transpose), it agrees
    gB_native, gA_native = vjp(
        lambda b, a: torch.triangular_solve(b, a, upper, transpose, unitriangular),
        [Bb, A],
        (g, g_coefficient),
    )
    close(gB, gB_native)
    close(gA, gA_native)


# ---------------------------------------------------------------- Cholesky


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_tangent_and_grad_match_autograd(upper, dtype):
    A = spd(2, 3, 3, dtype=dtype)
    L = torch.linalg.cholesky(A, upper=upper)

    def fn(a):
        return torch.linalg.cholesky(a, upper=upper)

    At = torch.randn_like(A)  # not Hermitian: follows native's formula too
    close(F.cholesky_tangent(At, L, upper), jvp(fn, [A], [At]))
    g = torch.randn_like(L)
    (expected,) = vjp(fn, [A], g)
    close(F.cholesky_grad(g, L, upper), expected)
    # on Hermitian tangents, the gradient is the adjoint of the tangent
    H = At + At.mH
    close(
        inner(g, F.cholesky_tangent(H, L, upper)),
        inner(F.cholesky_grad(g, L, upper), H),
    )


def _factor(dtype, upper, garbage=True):
    """A Cholesky-like factor (real positive diagonal) with, when `garbage`, noise in
    the triangle the ops do not read."""
    L = torch.linalg.cholesky(spd(2, 3, 3, dtype=dtype))
    if upper:
        L = L.mH
    if garbage:
        L = L + F.triangular_part(torch.randn_like(L), not upper, True)
    return L


def _factor_tangent(L, upper):
    # Keep the diagonal real for complex factors: LAPACK's cholesky_inverse reads
    # only its real part.
    t = torch.randn_like(L)
    return t - 1j * t.diagonal(0, -2, -1).imag.diag_embed() if t.is_complex() else t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_solve_tangent_and_grads(upper, dtype):
    L, B = _factor(dtype, upper), torch.randn(3, 2, dtype=dtype)

    def fn(b, l):
        return torch.cholesky_solve(b, l, upper)

    X = fn(B, L)
    Bt, Lt = torch.randn_like(X), _factor_tangent(L, upper)
    Bb = B.expand_as(X)
    tangent = F.cholesky_solve_tangent(Bt, Lt, L, X, upper)
    close(tangent, finite_difference(fn, [Bb, L], [Bt, Lt]))
    g = torch.randn_like(X)
    gB, gL = F.cholesky_solve_grads(g, Bb, L, X, upper)
    close(inner(g, tangent), inner(gB, Bt) + inner(gL, Lt))
    # with a triangular factor, the gradient of B is native's
    close(gB, vjp(fn, [Bb, F.triangular_part(L, upper)], g)[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_inverse_tangent_and_grad(upper, dtype):
    L = _factor(dtype, upper)

    def fn(l):
        return torch.cholesky_inverse(l, upper)

    X = fn(L)
    Lt = _factor_tangent(L, upper)
    tangent = F.cholesky_inverse_tangent(Lt, L, X, upper)
    close(tangent, finite_difference(fn, [L], [Lt]))
    g = torch.randn_like(X)
    gL = F.cholesky_inverse_grad(g, L, X, upper)
    close(inner(g, tangent), inner(gL, Lt))


# ---------------------------------------------------------------- determinants


def _det_inputs(dtype, contiguous):
    A = invertible(2, 3, 3, dtype=dtype)
    return A if contiguous else A.mT  # the saved LU is of A^T for contiguous real A


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_det_tangent_and_grad_match_autograd(contiguous, dtype):
    A = _det_inputs(dtype, contiguous)
    det, LU, pivots = torch.ops.aten._linalg_det(A)
    At = torch.randn_like(A)
    close(F.det_tangent(At, A, det), jvp(torch.linalg.det, [A], [At]))
    g = torch.randn_like(det)
    (expected,) = vjp(torch.linalg.det, [A], g)
    close(F.det_grad(g, A, det, LU, pivots), expected)


def test_det_derivatives_at_a_singular_matrix_are_the_adjugate():
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=R)
    det, LU, pivots = torch.ops.aten._linalg_det(A)
    At = torch.randn_like(A)
    close(
        F.det_tangent(At, A, det),
        finite_difference(torch.linalg.det, [A], [At]),
    )
    cofactors = torch.tensor([[4.0, -2.0], [-2.0, 1.0]], dtype=R)  # adj(A)^T
    close(F.det_grad(torch.tensor(1.0, dtype=R), A, det, LU, pivots), cofactors)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_slogdet_tangents_and_grad_match_autograd(contiguous, dtype):
    A = _det_inputs(dtype, contiguous)
    sign, logabsdet, LU, pivots = torch.ops.aten._linalg_slogdet(A)
    At = torch.randn_like(A)
    got = F.slogdet_tangents(At, A, sign)
    for got_one, expected in zip(got, jvp(torch.linalg.slogdet, [A], [At])):
        close(got_one, expected)
    g_sign, g_logabsdet = torch.randn_like(sign), torch.randn_like(logabsdet)
    (expected,) = vjp(torch.linalg.slogdet, [A], (g_sign, g_logabsdet))
    close(F.slogdet_grad(g_sign, g_logabsdet, A, sign, LU, pivots), expected)


# ---------------------------------------------------------------- LU

LU_SHAPES = [(3, 3), (2, 3, 3), (3, 5), (2, 3, 5), (5, 3), (2, 5, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_tangents_and_grad_match_autograd(shape, dtype):
    A = torch.randn(shape, dtype=dtype)
    P, L, U = torch.linalg.lu(A)

    def fn(a):
        return torch.linalg.lu(a)[1:]

    At = torch.randn_like(A)
    for got, expected in zip(F.lu_tangents(At, P, L, U), jvp(fn, [A], [At])):
        close(got, expected)
    gL, gU = torch.randn_like(L), torch.randn_like(U)
    (expected,) = vjp(fn, [A], (gL, gU))
    close(F.lu_grad(gL, gU, P, L, U), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_and_unpack_match_autograd(shape, dtype):
    A = torch.randn(shape, dtype=dtype)
    LU, pivots = torch.linalg.lu_factor(A)

    def factor(a):
        return torch.linalg.lu_factor(a)[0]

    def unpack(lu):
        return torch.lu_unpack(lu, pivots)[1:]

    At = torch.randn_like(A)
    close(F.lu_factor_tangent(At, LU, pivots), jvp(factor, [A], [At]))
    g = torch.randn_like(LU)
    close(F.lu_factor_grad(g, LU, pivots), vjp(factor, [A], g)[0])
    for got, expected in zip(F.lu_unpack_tangents(At), jvp(unpack, [LU], [At])):
        close(got, expected)
    _, L, U = torch.lu_unpack(LU, pivots)
    gL, gU = torch.randn_like(L), torch.randn_like(U)
    close(F.lu_unpack_grad(gL, gU, LU), vjp(unpack, [LU], (gL, gU))[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_lu_solve_tangent_and_grads_match_autograd(left, adjoint, batch, dtype):
    LU, pivots = torch.linalg.lu_factor(invertible(*batch, 3, 3, dtype=dtype))
    B = torch.randn(2, 3, 2, dtype=dtype) if left else torch.randn(2, 2, 3, dtype=dtype)

    def fn(lu, b):
        return torch.linalg.lu_solve(lu, pivots, b, left=left, adjoint=adjoint)

    X = fn(LU, B)
    LUt, Bt = torch.randn_like(LU), torch.randn_like(B)
    tangent = F.lu_solve_tangent(LUt, Bt, LU, pivots, X, left, adjoint)
    close(tangent, jvp(fn, [LU, B], [LUt, Bt]))
    g = torch.randn_like(X)
    got = F.lu_solve_grads(g, LU, pivots, B, X, left, adjoint)
    for got_one, expected in zip(got, vjp(fn, [LU, B], g)):
        close(got_one, expected)


# ---------------------------------------------------------------- exp, Householder


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_differential_matches_autograd(dtype):
    A, E = torch.randn(2, 3, 3, dtype=dtype), torch.randn(2, 3, 3, dtype=dtype)
    f = torch.linalg.matrix_exp
    close(F.matrix_exp_differential(A, E, False), jvp(f, [A], [E]))
    close(F.matrix_exp_differential(A, E, True), vjp(f, [A], E)[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, k", [((5, 5), 3), ((6, 4), 4), ((2, 5, 3), 2), ((4, 4), 0)]
)
def test_householder_product_tangent_and_grads(shape, k, dtype):
    A = torch.randn(shape, dtype=dtype)
    tau = torch.randn(*shape[:-2], k, dtype=dtype)
    f = torch.linalg.householder_product
    At, taut = torch.randn_like(A), torch.randn_like(tau)
    tangent = F.householder_product_tangent(At, taut, A, tau)
    close(tangent, finite_difference(f, [A, tau], [At, taut]))
    g = torch.randn_like(tangent)
    gA, gtau = F.householder_product_grads(g, A, tau)
    close(inner(g, tangent), inner(gA, At) + inner(gtau, taut))
    if k:
        for got, expected in zip((gA, gtau), vjp(f, [A, tau], g)):
            close(got, expected)


def test_reflectors_square_gives_the_whole_householder_product():
    A = torch.randn(5, 3, dtype=C)
    tau = torch.randn(3, dtype=C)
    square = F.reflectors_square(A)
    assert square.shape == (5, 5)
    Q = torch.linalg.householder_product(square, tau)
    close(Q[:, :3], torch.linalg.householder_product(A, tau))
    close(Q @ torch.eye(5, dtype=C), torch.ormqr(A, tau, torch.eye(5, dtype=C)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, k, other, left, transpose",
    [
        ((4, 3), 3, (4, 2), True, False),
        ((4, 3), 3, (4, 2), True, True),
        ((4, 2), 2, (3, 4), False, False),
        ((4, 2), 2, (3, 4), False, True),
        ((2, 3, 3), 3, (2, 3, 2), True, True),
    ],
)
def test_ormqr_tangent_and_grads(shape, k, other, left, transpose, dtype):
    # Against ormqr written out: op(Q) C or C op(Q) with Q the whole product of
    # the reflectors (householder_product of them padded to m columns).
    A = torch.randn(shape, dtype=dtype)
    tau = torch.randn(*shape[:-2], k, dtype=dtype)
    B = torch.randn(other, dtype=dtype)

    def written_out(a, t, b):
        m = a.shape[-2]
        full = torch.cat([a, a.new_zeros(*a.shape[:-1], m - a.shape[-1])], -1)
        q = torch.linalg.householder_product(full, t)
        q = q.mH if transpose else q
        return q @ b if left else b @ q

    def f(a, t, b):
        return torch.ormqr(a, t, b, left, transpose)

    close(f(A, tau, B), written_out(A, tau, B))
    At, taut, Bt = torch.randn_like(A), torch.randn_like(tau), torch.randn_like(B)
    q_t = F.householder_product_tangent(
        F.reflectors_square(At), taut, F.reflectors_square(A), tau
    )
    tangent = F.ormqr_tangent(q_t, Bt, A, tau, B, left, transpose)
    close(tangent, jvp(written_out, [A, tau, B], [At, taut, Bt]))
    g = torch.randn_like(tangent)
    grads = F.ormqr_grads(g, A, tau, B, left, transpose)
    for got, expected in zip(grads, vjp(written_out, [A, tau, B], g)):
        close(got, expected)


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("dtype", [R, C])
def test_det_lu_tangent_and_grad_match_lu_factor(contiguous, dtype):
    # _linalg_det saves the LU of A^T for a real contiguous A, of A otherwise.
    A = torch.randn(2, 3, 3, dtype=dtype)
    A = A if contiguous else A.mT
    _, LU, pivots = torch.ops.aten._linalg_det(A)
    transposed = contiguous and not A.is_complex()

    def factor(a):
        return torch.linalg.lu_factor(a.mT if transposed else a)[0]

    close(LU, factor(A))
    At = torch.randn_like(A)
    close(F.det_lu_tangent(At, A, LU, pivots), jvp(factor, [A], [At]))
    g = torch.randn_like(LU)
    (expected,) = vjp(factor, [A], g)
    close(F.det_lu_grad(g, A, LU, pivots), expected)


def test_linalg_solve_grads_take_the_saved_lu_gradient():
    A, B = torch.randn(3, 3, dtype=R) + 3 * torch.eye(3, dtype=R), torch.randn(
        3, 2, dtype=R
    )
    X, LU, pivots, _ = torch.ops.aten._linalg_solve_ex(A, B)

    def run(a, b):
        return torch.linalg.solve(a, b), torch.linalg.lu_factor(a)[0]

    grads = [torch.randn_like(X), torch.randn_like(LU)]
    expected = vjp(run, [A, B], grads)
    got = F.linalg_solve_grads(grads[0], A, B, X, LU, pivots, True, grads[1])
    for g, e in zip(got, expected, strict=True):
        close(g, e)
