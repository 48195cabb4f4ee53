"""Helpers for linear algebra: solves, factorizations and determinants.

linalg.solve, triangular solves, Cholesky (factor, solve, inverse), det and
slogdet, LU (factor, unpack, solve), the matrix exponential and Householder
products.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    as_real_like,
    det_lu_is_of_transpose,
    det_or_limit,
    is_vector_rhs,
    lu_nonsingular,
    lu_unpack_tangents,
    reflectors_square,
    triangular_part,
    unbroadcast,
)

__all__ = [
    "cholesky_grad",
    "cholesky_inverse_grad",
    "cholesky_solve_grads",
    "det_grad",
    "det_lu_grad",
    "householder_product_grads",
    "householder_product_tangent",
    "linalg_solve_grads",
    "lu_factor_grad",
    "lu_grad",
    "lu_solve_grads",
    "ormqr_grads",
    "slogdet_grad",
    "solve_triangular_grads",
    "triangular_solve_grads",
]


def _sum_to(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Sum broadcast batch dims away to `like`'s shape (real part for a real one)."""
    return unbroadcast(t, like)


def linalg_solve_grads(grad, A, B, result, LU, pivots, left: bool, grad_LU=None):
    """Gradients (A, B) of X = A^{-1} B (`left`) or B A^{-1}: gB = A^{-H} g (or
    g A^{-H}), gA = -gB X^H (or -X^H gB), summed to the inputs' shapes; plus what
    the saved LU's gradient `grad_LU` passes on to A."""
    vector = is_vector_rhs(A, B)
    g = grad.unsqueeze(-1) if vector else grad
    X = result.unsqueeze(-1) if vector else result
    gB = torch.linalg.lu_solve(LU, pivots, g, left=left, adjoint=True)
    gA = _sum_to(-(gB.matmul(X.mH) if left else X.mH.matmul(gB)), A)
    if grad_LU is not None:
        gA = gA + lu_factor_grad(grad_LU, LU, pivots)
    return gA, _sum_to(gB.squeeze(-1) if vector else gB, B)


def solve_triangular_grads(grad, A, B, result, upper: bool, left: bool, unitri: bool):
    """Gradients (A, B) of linalg.solve_triangular: gB solves the adjoint system,
    gA = -gB X^H (or -X^H gB) restricted to the triangle the op reads."""
    gB = torch.linalg.solve_triangular(
        A.mH, grad, upper=not upper, left=left, unitriangular=unitri
    )
    gA = -(gB.matmul(result.mH) if left else result.mH.matmul(gB))
    return _sum_to(triangular_part(gA, upper, unitri), A), _sum_to(gB, B)


def triangular_solve_grads(
    grad_solution, grad_coefficient, B, A, solution, upper, transpose, unitri
):
    """Gradients (B, A) of triangular_solve, from those of the solution and of the
    cloned coefficient (a copy of A): gB = op(A)^{-H} g, gA = the triangle of
    -gB X^H (transposed back when `transpose`) plus the clone's gradient."""
    gB = torch.triangular_solve(grad_solution, A.conj(), upper, not transpose, unitri)[
        0
    ]
    g_op = -gB.matmul(solution.mH)
    gA = triangular_part(g_op.mT if transpose else g_op, upper, unitri)
    gA = gA + grad_coefficient
    return _sum_to(gB, B), _sum_to(gA, A)


def cholesky_grad(grad, L, upper: bool):
    """Gradient of the Cholesky factor: L^{-H} S L^{-1}, with X = tril(L^H gL) and
    S = (X + tril(X, -1)^H) / 2, Hermitian but for the diagonal (as native); on
    Hermitian tangents, the adjoint of `cholesky_tangent`."""
    L_ = L.mH if upper else L
    g = grad.mH if upper else grad
    x = L_.mH.matmul(g).tril()
    m = 0.5 * (x + x.tril(-1).mH)
    m = torch.linalg.solve_triangular(L_.mH, m, upper=True, left=True)
    return torch.linalg.solve_triangular(L_, m, upper=False, left=False)


def _cholesky_product_grad(gA, L, upper: bool):
    # Adjoint of `_cholesky_product_tangent`.
    L = triangular_part(L, upper)
    s = gA + gA.mH
    return triangular_part(L.matmul(s) if upper else s.matmul(L), upper)


def cholesky_solve_grads(grad, B, L, result, upper: bool):
    """Gradients (B, L) of cholesky_solve: gB = A^{-1} g (A = L L^H is Hermitian),
    gA = -gB X^H taken back to the factor's triangle."""
    gB = torch.cholesky_solve(grad, L, upper)
    gL = _cholesky_product_grad(-gB.matmul(result.mH), L, upper)
    return _sum_to(gB, B), _sum_to(gL, L)


def cholesky_inverse_grad(grad, L, result, upper: bool):
    """Gradient of cholesky_inverse: -R g R (R Hermitian) taken back to the factor."""
    return _cholesky_product_grad(-result.matmul(grad).matmul(result), L, upper)


def _inverse_adjoint(A, LU, pivots) -> torch.Tensor:
    # A^{-H} from the saved LU of A (or of A^T).
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    adjoint = not det_lu_is_of_transpose(A)
    return torch.linalg.lu_solve(lu_nonsingular(LU), pivots, eye, adjoint=adjoint)


def det_grad(grad, A, det, LU, pivots):
    """Gradient of det(A): g conj(det) A^{-H} (g adj(A)^H at a singular A)."""
    scale = (grad * det_or_limit(det, LU, pivots).conj()).unsqueeze(-1).unsqueeze(-1)
    return scale * _inverse_adjoint(A, LU, pivots)


def det_lu_grad(grad_LU, A, LU, pivots):
    """Gradient that the saved LU's (of A, or of A^T) passes on to A."""
    g = lu_factor_grad(grad_LU, LU, pivots)
    return g.mT if det_lu_is_of_transpose(A) else g


def slogdet_grad(grad_sign, grad_logabsdet, A, sign, LU, pivots):
    """Gradient of slogdet: c A^{-H}, c = g_logabsdet + i Im(g_sign conj(sign))
    (c = g_logabsdet for real A)."""
    c = grad_logabsdet
    if A.is_complex():
        c = c + 1j * (grad_sign * sign.conj()).imag
    return c.unsqueeze(-1).unsqueeze(-1) * _inverse_adjoint(A, LU, pivots)


def lu_grad(grad_L, grad_U, P, L, U):
    """Gradient of A = P L U from those of L and U: the adjoint of `lu_tangents`
    (only the strictly lower part of grad_L's leading block and the upper part of
    grad_U's count, as L's unit diagonal and zeros are constants)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    L1, U1 = L[..., :k, :], U[..., :, :k]
    gL, gU = grad_L[..., :k, :], grad_U[..., :, :k]
    tail = None
    if m < n:
        tail = torch.linalg.solve_triangular(
            L1.mH, grad_U[..., :, k:], upper=True, left=True, unitriangular=True
        )
        gL = gL - tail.matmul(U[..., :, k:].mH)
    elif m > n:
        tail = torch.linalg.solve_triangular(
            U1.mH, grad_L[..., k:, :], upper=False, left=False
        )
        gU = gU - L[..., k:, :].mH.matmul(tail)
    gM = L1.mH.matmul(gL).tril(-1) + gU.matmul(U1.mH).triu()
    gE = torch.linalg.solve_triangular(
        L1.mH, gM, upper=True, left=True, unitriangular=True
    )
    gE = torch.linalg.solve_triangular(U1.mH, gE, upper=False, left=False)
    if m < n:
        gE = torch.cat([gE, tail], -1)
    elif m > n:
        gE = torch.cat([gE, tail], -2)
    return P.matmul(gE)


def lu_factor_grad(grad, LU, pivots):
    """Gradient of linalg.lu_factor from that of the packed LU."""
    P, L, U = torch.lu_unpack(LU, pivots)
    gL, gU = lu_unpack_tangents(grad)
    return lu_grad(gL, gU, P, L, U)


def lu_solve_grads(grad, LU, pivots, B, result, left: bool, adjoint: bool):
    """Gradients (LU, B) of linalg.lu_solve: gB solves the adjoint system, and the
    gradient of op(A) (-gB X^H, or -X^H gB) goes back to the packed factors."""
    gB = torch.linalg.lu_solve(LU, pivots, grad, left=left, adjoint=not adjoint)
    g_op = -(gB.matmul(result.mH) if left else result.mH.matmul(gB))
    gA = g_op.mH if adjoint else g_op
    P, L, U = torch.lu_unpack(LU, pivots)
    gA = P.mT.matmul(gA)
    gLU = gA.matmul(U.mH).tril(-1) + L.mH.matmul(gA).triu()
    return _sum_to(gLU, LU), _sum_to(gB, B)


def _householder_vectors(input: torch.Tensor, k: int) -> torch.Tensor:
    # The first k reflector vectors: below the diagonal from input, 1 on it.
    v = input[..., :, :k].tril(-1)
    eye = torch.eye(input.shape[-2], k, dtype=input.dtype, device=input.device)
    return v + eye


def householder_product_tangent(input_t, tau_t, input, tau):
    """Tangent of Q = (H_1 ... H_k)[:, :n], H_i = I - tau_i v_i v_i^H, built up
    H by H: d(Q_i) = d(Q_{i-1}) H_i + Q_{i-1} dH_i, dH_i = -dtau_i v v^H -
    tau_i (dv v^H + v dv^H) (dv: input_t's column i below the diagonal)."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    V = _householder_vectors(input, k)
    dV = input_t[..., :, :k].tril(-1)
    Q = torch.eye(m, dtype=input.dtype, device=input.device).expand(
        *input.shape[:-2], m, m
    )
    dQ = torch.zeros_like(Q)
    for i in range(k):
        v, dv = V[..., :, i : i + 1], dV[..., :, i : i + 1]
        t, dt = tau[..., i, None, None], tau_t[..., i, None, None]
        vvH = v.matmul(v.mH)
        H = torch.eye(m, dtype=input.dtype, device=input.device) - t * vvH
        dH = -dt * vvH - t * (dv.matmul(v.mH) + v.matmul(dv.mH))
        dQ = dQ.matmul(H) + Q.matmul(dH)
        Q = Q.matmul(H)
    return dQ[..., :, :n]


def householder_product_grads(grad, input, tau):
    """Gradients (input, tau) of householder_product, the adjoint of
    `householder_product_tangent`: with gH_i = (H_1..H_{i-1})^H G (H_{i+1}..H_k
    E)^H, gtau_i = -v^H gH_i v and gv_i = -conj(tau_i) gH_i v - tau_i gH_i^H v."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    V = _householder_vectors(input, k)
    eye = torch.eye(m, dtype=input.dtype, device=input.device)
    Hs = [
        eye
        - tau[..., i, None, None] * V[..., :, i : i + 1].matmul(V[..., :, i : i + 1].mH)
        for i in range(k)
    ]
    # right[i] = H_{i+1} ... H_k E (m x n), E the first n columns of I.
    right = [None] * (k + 1)
    right[k] = torch.eye(m, n, dtype=input.dtype, device=input.device).expand(
        *input.shape[:-2], m, n
    )
    for i in reversed(range(k)):
        right[i] = Hs[i].matmul(right[i + 1])
    prefix = torch.eye(m, dtype=input.dtype, device=input.device).expand(
        *input.shape[:-2], m, m
    )
    g_cols, g_tau = [], []
    for i in range(k):
        gH = prefix.mH.matmul(grad).matmul(right[i + 1].mH)
        v, t = V[..., :, i : i + 1], tau[..., i, None, None]
        g_tau.append(-(v.mH.matmul(gH).matmul(v))[..., 0, 0])
        g_cols.append(-t.conj() * gH.matmul(v) - t * gH.mH.matmul(v))
        prefix = prefix.matmul(Hs[i])
    g_input = torch.zeros_like(input, dtype=grad.dtype)
    if k:
        g_input = g_input + torch.nn.functional.pad(
            torch.cat(g_cols, -1).tril(-1), (0, n - k)
        )
        g_tau = torch.stack(g_tau, -1)
    else:
        g_tau = torch.zeros_like(tau, dtype=grad.dtype)
    return as_real_like(g_input, input), as_real_like(g_tau, tau)


def ormqr_grads(grad, input, tau, other, left: bool, transpose: bool):
    """Gradients (input, tau, other) of ormqr, the adjoint of `ormqr_tangent`:
    other's is op(Q)^H G (ormqr with `transpose` flipped); Q's (the whole m x m
    product) is G C^H, C G^H, C^H G or G^H C as Q stands left or right, plain or
    transposed, taken to the reflectors and tau by `householder_product_grads`
    and cut to input's k columns."""
    if left:
        grad_q = other.matmul(grad.mH) if transpose else grad.matmul(other.mH)
    else:
        grad_q = grad.mH.matmul(other) if transpose else other.mH.matmul(grad)
    grad_input, grad_tau = householder_product_grads(
        grad_q, reflectors_square(input), tau
    )
    grad_other = torch.ormqr(input, tau, grad, left, not transpose)
    return grad_input[..., : input.shape[-1]], grad_tau, grad_other
