"""Helpers for linear algebra: solves, factorizations and determinants.

linalg.solve, triangular solves, Cholesky (factor, solve, inverse), det and
slogdet, LU (factor, unpack, solve), the matrix exponential and Householder
products.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import as_real_like

from .elementwise import unbroadcast

__all__ = [
    "cholesky_grad",
    "cholesky_inverse_grad",
    "cholesky_inverse_tangent",
    "cholesky_solve_grads",
    "cholesky_solve_tangent",
    "cholesky_tangent",
    "det_grad",
    "det_lu_grad",
    "det_lu_tangent",
    "det_tangent",
    "householder_product_grads",
    "householder_product_tangent",
    "linalg_solve_grads",
    "linalg_solve_tangent",
    "lu_factor_grad",
    "lu_factor_tangent",
    "lu_grad",
    "lu_solve_grads",
    "lu_solve_tangent",
    "lu_tangents",
    "lu_unpack_grad",
    "lu_unpack_tangents",
    "matrix_exp_differential",
    "side_matmul",
    "slogdet_grad",
    "slogdet_tangents",
    "solve_triangular_grads",
    "triangular_part",
    "triangular_solve_grads",
    "triangular_solve_tangent",
]


def triangular_part(t: torch.Tensor, upper: bool, unitriangular: bool = False):
    """The triangle of the last two dims an `upper`/lower triangular op reads: triu
    or tril, without the diagonal when `unitriangular` (a unit diagonal is not read).
    Self-adjoint, so it projects tangents and gradients alike."""
    if upper:
        return t.triu(1 if unitriangular else 0)
    return t.tril(-1 if unitriangular else 0)


def side_matmul(m: torch.Tensor, x: torch.Tensor, left: bool) -> torch.Tensor:
    """`m @ x` when `left`, else `x @ m`: the coefficient matrix on its side of a
    solve (`left` as in linalg.solve)."""
    return m.matmul(x) if left else x.matmul(m)


def _sum_to(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Sum broadcast batch dims away to `like`'s shape (real part for a real one)."""
    return unbroadcast(t, like)


def _is_vector_rhs(A: torch.Tensor, B: torch.Tensor) -> bool:
    # linalg.solve's rule: B is a (batch of) vector(s) when it is 1-d or has A's
    # shape without the last dim.
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])


def _factor(A):
    # The LU factorization of A, computed again rather than read from the op's
    # saved output: native autograd does not differentiate that output, so a
    # formula reading it would lose its share of the second derivative under
    # reverse over forward (and at outer levels it only moves with A if read so).
    LU, pivots, _ = torch.linalg.lu_factor_ex(A)
    return LU, pivots


def linalg_solve_tangent(A_t, B_t, A, B, result, left: bool):
    """Tangent of X = A^{-1} B (`left`) or B A^{-1}: A^{-1}(dB - dA X), or
    (dB - X dA) A^{-1}; vector right-hand sides as linalg.solve reads them."""
    vector = _is_vector_rhs(A, B)
    X = result.unsqueeze(-1) if vector else result
    dB = B_t.unsqueeze(-1) if vector else B_t
    rhs = dB - side_matmul(A_t, X, left)
    LU, pivots = _factor(A)
    dX = torch.linalg.lu_solve(LU, pivots, rhs, left=left)
    return dX.squeeze(-1) if vector else dX


def linalg_solve_grads(grad, A, B, result, LU, pivots, left: bool, grad_LU=None):
    """Gradients (A, B) of X = A^{-1} B (`left`) or B A^{-1}: gB = A^{-H} g (or
    g A^{-H}), gA = -gB X^H (or -X^H gB), summed to the inputs' shapes; plus what
    the saved LU's gradient `grad_LU` passes on to A."""
    vector = _is_vector_rhs(A, B)
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


def triangular_solve_tangent(B_t, A_t, A, solution, upper, transpose, unitri):
    """Tangent of triangular_solve's solution X of op(A) X = B (op: transpose when
    `transpose`): op(A)^{-1}(dB - op(dA') X), dA' the triangle of dA it reads."""
    dA = triangular_part(A_t, upper, unitri)
    rhs = B_t - (dA.mT if transpose else dA).matmul(solution)
    return torch.triangular_solve(rhs, A, upper, transpose, unitri)[0]


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


def _phi(m: torch.Tensor) -> torch.Tensor:
    # The lower triangle with half the diagonal (self-adjoint).
    return m.tril() - 0.5 * torch.diag_embed(m.diagonal(0, -2, -1))


def cholesky_tangent(A_t, L, upper: bool):
    """Tangent of the Cholesky factor (A = L L^H, or U^H U when `upper`):
    dL = L phi(L^{-1} dA L^{-H}), phi = lower triangle with half the diagonal."""
    L_ = L.mH if upper else L
    m = torch.linalg.solve_triangular(L_, A_t, upper=False, left=True)
    m = torch.linalg.solve_triangular(L_.mH, m, upper=True, left=False)
    dL = L_.matmul(_phi(m))
    return dL.mH if upper else dL


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


def _cholesky_product_tangent(L_t, L, upper: bool):
    # d(L L^H) (or d(U^H U)), reading the factor's triangle only.
    L, dL = triangular_part(L, upper), triangular_part(L_t, upper)
    k = dL.mH.matmul(L) if upper else dL.matmul(L.mH)
    return k + k.mH


def _cholesky_product_grad(gA, L, upper: bool):
    # Adjoint of `_cholesky_product_tangent`.
    L = triangular_part(L, upper)
    s = gA + gA.mH
    return triangular_part(L.matmul(s) if upper else s.matmul(L), upper)


def cholesky_solve_tangent(B_t, L_t, L, result, upper: bool):
    """Tangent of X = (L L^H)^{-1} B (U^H U when `upper`), the factor read in its
    triangle: (L L^H)^{-1}(dB - d(L L^H) X)."""
    rhs = B_t - _cholesky_product_tangent(L_t, L, upper).matmul(result)
    return torch.cholesky_solve(rhs, L, upper)


def cholesky_solve_grads(grad, B, L, result, upper: bool):
    """Gradients (B, L) of cholesky_solve: gB = A^{-1} g (A = L L^H is Hermitian),
    gA = -gB X^H taken back to the factor's triangle."""
    gB = torch.cholesky_solve(grad, L, upper)
    gL = _cholesky_product_grad(-gB.matmul(result.mH), L, upper)
    return _sum_to(gB, B), _sum_to(gL, L)


def cholesky_inverse_tangent(L_t, L, result, upper: bool):
    """Tangent of R = (L L^H)^{-1} (U^H U when `upper`): -R d(L L^H) R."""
    return -result.matmul(_cholesky_product_tangent(L_t, L, upper)).matmul(result)


def cholesky_inverse_grad(grad, L, result, upper: bool):
    """Gradient of cholesky_inverse: -R g R (R Hermitian) taken back to the factor."""
    return _cholesky_product_grad(-result.matmul(grad).matmul(result), L, upper)


def _lu_nonsingular(LU: torch.Tensor) -> torch.Tensor:
    # Zero pivots moved to eps, as native does: det is smooth, so its derivative
    # at a singular matrix is the limit of nearby ones.
    d = LU.diagonal(0, -2, -1)
    eps = torch.finfo(d.real.dtype).eps
    return LU + torch.diag_embed(torch.where(d == 0, eps, 0.0).to(LU.dtype))


def _det_lu_is_of_transpose(A: torch.Tensor) -> bool:
    # _linalg_det and _linalg_slogdet factor A^T when A is real and contiguous.
    return A.is_contiguous() and not A.is_complex()


def _trace_inv_times(A_t, LU, pivots) -> torch.Tensor:
    # tr(A^{-1} dA) from the LU of A.
    solved = torch.linalg.lu_solve(_lu_nonsingular(LU), pivots, A_t)
    return solved.diagonal(0, -2, -1).sum(-1)


def _inverse_adjoint(A, LU, pivots) -> torch.Tensor:
    # A^{-H} from the saved LU of A (or of A^T).
    eye = torch.eye(A.shape[-1], dtype=A.dtype).expand_as(A)
    adjoint = not _det_lu_is_of_transpose(A)
    return torch.linalg.lu_solve(_lu_nonsingular(LU), pivots, eye, adjoint=adjoint)


def _det_or_limit(det, LU, pivots) -> torch.Tensor:
    # det, or where it is 0, the determinant with zero pivots moved to eps: times
    # A^{-1} from the same factors, it tends to the adjugate (the derivative of det).
    k = LU.shape[-1]
    swaps = (pivots != torch.arange(1, k + 1, dtype=pivots.dtype)).sum(-1)
    sign = (1 - 2 * (swaps % 2)).to(LU.dtype)
    nudged = sign * _lu_nonsingular(LU).diagonal(0, -2, -1).prod(-1)
    return torch.where(det == 0, nudged, det)


def det_tangent(A_t, A, det):
    """Tangent of det(A): det * tr(A^{-1} dA); at a singular A, the limit
    tr(adj(A) dA)."""
    LU, pivots = _factor(A)
    return _det_or_limit(det, LU, pivots) * _trace_inv_times(A_t, LU, pivots)


def det_grad(grad, A, det, LU, pivots):
    """Gradient of det(A): g conj(det) A^{-H} (g adj(A)^H at a singular A)."""
    scale = (grad * _det_or_limit(det, LU, pivots).conj()).unsqueeze(-1).unsqueeze(-1)
    return scale * _inverse_adjoint(A, LU, pivots)


def det_lu_tangent(A_t, A, LU, pivots):
    """Tangent of the LU factorization _linalg_det and _linalg_slogdet save (of A,
    or of A^T for a real contiguous A). The formulas read it: at an outer level it
    must move with A, or second derivatives miss its share."""
    return lu_factor_tangent(A_t.mT if _det_lu_is_of_transpose(A) else A_t, LU, pivots)


def det_lu_grad(grad_LU, A, LU, pivots):
    """Gradient that the saved LU's (of A, or of A^T) passes on to A."""
    g = lu_factor_grad(grad_LU, LU, pivots)
    return g.mT if _det_lu_is_of_transpose(A) else g


def slogdet_tangents(A_t, A, sign) -> tuple:
    """Tangents (sign, logabsdet) of slogdet: with t = tr(A^{-1} dA), d logabsdet =
    Re t and d sign = i Im(t) sign (zero for real A)."""
    t = _trace_inv_times(A_t, *_factor(A))
    if not t.is_complex():
        return torch.zeros_like(sign), t
    return sign * (1j * t.imag), t.real


def slogdet_grad(grad_sign, grad_logabsdet, A, sign, LU, pivots):
    """Gradient of slogdet: c A^{-H}, c = g_logabsdet + i Im(g_sign conj(sign))
    (c = g_logabsdet for real A)."""
    c = grad_logabsdet
    if A.is_complex():
        c = c + 1j * (grad_sign * sign.conj()).imag
    return c.unsqueeze(-1).unsqueeze(-1) * _inverse_adjoint(A, LU, pivots)


def lu_tangents(A_t, P, L, U) -> tuple:
    """Tangents (dL, dU) of A = P L U (L unit lower m x k, U upper k x n, any m, n).
    On the leading k x k block, M = L^{-1} P^T dA U^{-1}, dL = L tril(M, -1),
    dU = triu(M) U; the rest of U (wide) or of L (tall) follows from the remaining
    columns or rows of P^T dA."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    E = P.mT.matmul(A_t)
    L1, U1 = L[..., :k, :], U[..., :, :k]
    M = torch.linalg.solve_triangular(
        L1, E[..., :k, :k], upper=False, left=True, unitriangular=True
    )
    M = torch.linalg.solve_triangular(U1, M, upper=True, left=False)
    dL, dU = L1.matmul(M.tril(-1)), M.triu().matmul(U1)
    if m < n:
        rest = E[..., :, k:] - dL.matmul(U[..., :, k:])
        rest = torch.linalg.solve_triangular(
            L1, rest, upper=False, left=True, unitriangular=True
        )
        dU = torch.cat([dU, rest], -1)
    elif m > n:
        rest = E[..., k:, :] - L[..., k:, :].matmul(dU)
        rest = torch.linalg.solve_triangular(U1, rest, upper=True, left=False)
        dL = torch.cat([dL, rest], -2)
    return dL, dU


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


def lu_unpack_tangents(LU_t) -> tuple:
    """(L, U) parts of a packed LU (m x n): the strictly lower part of its first
    k = min(m, n) columns and the upper part of its first k rows; linear, so also
    lu_unpack's tangents."""
    k = min(LU_t.shape[-2], LU_t.shape[-1])
    return LU_t[..., :, :k].tril(-1), LU_t[..., :k, :].triu()


def lu_unpack_grad(grad_L, grad_U, LU):
    """Gradient of a packed LU from those of its unpacked L and U (the adjoint of
    `lu_unpack_tangents`)."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    g = torch.zeros_like(LU, dtype=grad_L.dtype)
    g = g + torch.nn.functional.pad(grad_L.tril(-1), (0, n - k))
    return g + torch.nn.functional.pad(grad_U.triu(), (0, 0, 0, m - k))


def lu_factor_tangent(A_t, LU, pivots):
    """Tangent of linalg.lu_factor's packed LU, dL and dU packed the same way."""
    P, L, U = torch.lu_unpack(LU, pivots)
    dL, dU = lu_tangents(A_t, P, L, U)
    return lu_unpack_grad(dL, dU, LU)


def lu_factor_grad(grad, LU, pivots):
    """Gradient of linalg.lu_factor from that of the packed LU."""
    P, L, U = torch.lu_unpack(LU, pivots)
    gL, gU = lu_unpack_tangents(grad)
    return lu_grad(gL, gU, P, L, U)


def lu_solve_tangent(LU_t, B_t, LU, pivots, result, left: bool, adjoint: bool):
    """Tangent of linalg.lu_solve, X = op(A)^{-1} B (or B op(A)^{-1}), A = P L U
    from the packed LU, op = ^H when `adjoint`: op(A)^{-1}(dB - op(dA) X) (or on the
    right), dA = P (dL U + L dU) from the packed tangent."""
    P, L, U = torch.lu_unpack(LU, pivots)
    dL, dU = lu_unpack_tangents(LU_t)
    dA = P.matmul(dL.matmul(U) + L.matmul(dU))
    rhs = B_t - side_matmul(dA.mH if adjoint else dA, result, left)
    return torch.linalg.lu_solve(LU, pivots, rhs, left=left, adjoint=adjoint)


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


def matrix_exp_differential(A, E, adjoint: bool):
    """The Frechet derivative of the matrix exponential at A in direction E, read
    off exp([[A, E], [0, A]]); with `adjoint`, at A^H (its adjoint, for gradients)."""
    if adjoint:
        A = A.mH
    E = E.to(A.dtype) if A.is_complex() else E
    top = torch.cat([A, E], -1)
    bottom = torch.cat([torch.zeros_like(A), A], -1)
    n = A.shape[-1]
    return torch.linalg.matrix_exp(torch.cat([top, bottom], -2))[..., :n, n:]


def _householder_vectors(input: torch.Tensor, k: int) -> torch.Tensor:
    # The first k reflector vectors: below the diagonal from input, 1 on it.
    v = input[..., :, :k].tril(-1)
    eye = torch.eye(input.shape[-2], k, dtype=input.dtype)
    return v + eye


def householder_product_tangent(input_t, tau_t, input, tau):
    """Tangent of Q = (H_1 ... H_k)[:, :n], H_i = I - tau_i v_i v_i^H, built up
    H by H: d(Q_i) = d(Q_{i-1}) H_i + Q_{i-1} dH_i, dH_i = -dtau_i v v^H -
    tau_i (dv v^H + v dv^H) (dv: input_t's column i below the diagonal)."""
    m, n, k = input.shape[-2], input.shape[-1], tau.shape[-1]
    V = _householder_vectors(input, k)
    dV = input_t[..., :, :k].tril(-1)
    Q = torch.eye(m, dtype=input.dtype).expand(*input.shape[:-2], m, m)
    dQ = torch.zeros_like(Q)
    for i in range(k):
        v, dv = V[..., :, i : i + 1], dV[..., :, i : i + 1]
        t, dt = tau[..., i, None, None], tau_t[..., i, None, None]
        vvH = v.matmul(v.mH)
        H = torch.eye(m, dtype=input.dtype) - t * vvH
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
    eye = torch.eye(m, dtype=input.dtype)
    Hs = [
        eye
        - tau[..., i, None, None] * V[..., :, i : i + 1].matmul(V[..., :, i : i + 1].mH)
        for i in range(k)
    ]
    # right[i] = H_{i+1} ... H_k E (m x n), E the first n columns of I.
    right = [None] * (k + 1)
    right[k] = torch.eye(m, n, dtype=input.dtype).expand(*input.shape[:-2], m, n)
    for i in reversed(range(k)):
        right[i] = Hs[i].matmul(right[i + 1])
    prefix = torch.eye(m, dtype=input.dtype).expand(*input.shape[:-2], m, m)
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
