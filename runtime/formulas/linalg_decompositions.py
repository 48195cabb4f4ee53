"""Helpers for linear algebra: spectral decompositions and least squares.

SVD, eigh, eig and QR (tangents of the factors, gradients from theirs), the
pseudo-inverse and lstsq.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import as_real_like

from .elementwise import unbroadcast

__all__ = [
    "eig_grad",
    "eig_tangents",
    "eigh_grad",
    "eigh_tangents",
    "hermitian_sqrt_differential",
    "lstsq_b_tangent",
    "lstsq_grads",
    "lstsq_residuals_tangent",
    "lstsq_self_tangent",
    "pinv_grad",
    "pinv_tangent",
    "qr_grad",
    "qr_tangents",
    "svd_grad",
    "svd_tangents",
]


def _offdiag(x: torch.Tensor) -> torch.Tensor:
    """`x` with its (batched) diagonal set to zero."""
    return x - torch.diag_embed(x.diagonal(0, -2, -1))


def _gaps(values: torch.Tensor) -> torch.Tensor:
    """E[..., i, j] = values[j] - values[i], with ones on the diagonal (so that
    dividing an off-diagonal matrix by it leaves the diagonal alone)."""
    k = values.shape[-1]
    eye = torch.eye(k, dtype=values.dtype, device=values.device)
    return values.unsqueeze(-2) - values.unsqueeze(-1) + eye


def _svd_factors(A, U, S, Vh, full_matrices: bool, compute_uv: bool):
    """The thin factors (U with k columns, Vh with k rows, k = min(m, n)) of an SVD
    output; recomputed when the op ran with compute_uv=False (svdvals)."""
    if not compute_uv:
        U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    k = S.shape[-1]
    if full_matrices:
        U, Vh = U[..., :k], Vh[..., :k, :]
    return U, S, Vh


def svd_tangents(A_t, A_p, U, S, Vh, full_matrices: bool, compute_uv: bool) -> tuple:
    """Tangents (dU, dS, dVh) of `_linalg_svd` (A = U diag(S) Vh) for the tangent
    A_t, in the gauge native forward AD uses.

    With dP = U^H dA V (k x k): dS = Re diag(dP); off the diagonal
    U^H dU = (dP S + S dP^H) / E and V^H dV = (S dP + dP^H S) / E, with
    E_ij = s_j^2 - s_i^2. The phase of each complex singular pair is split evenly:
    diag(U^H dU) = -diag(V^H dV) = i Im(diag dP) / (2 S). For m > n (m < n) U (V)
    also moves off its span by (I - U U^H) dA V S^-1 ((I - V V^H) dA^H U S^-1).
    With full_matrices the extra columns of U (rows of Vh) get zero tangents;
    without compute_uv only dS is returned (dU, dVh empty like U, Vh)."""
    U0, Vh0 = U, Vh
    U, S, Vh = _svd_factors(A_p, U, S, Vh, full_matrices, compute_uv)
    V = Vh.mH
    m, n = A_t.shape[-2], A_t.shape[-1]
    dP = U.mH @ (A_t @ V) if m >= n else (U.mH @ A_t) @ V
    dS = dP.diagonal(0, -2, -1).real
    if not compute_uv:
        return torch.zeros_like(U0), dS, torch.zeros_like(Vh0)
    E = _gaps(S * S)
    off = _offdiag(dP)
    dU = U @ ((off * S.unsqueeze(-2) + S.unsqueeze(-1) * off.mH) / E)
    dV = V @ ((S.unsqueeze(-1) * off + off.mH * S.unsqueeze(-2)) / E)
    if dP.is_complex():
        phase = 0.5j * dP.diagonal(0, -2, -1).imag / S
        dU = dU + U * phase.unsqueeze(-2)
        dV = dV - V * phase.unsqueeze(-2)
    if m > n:
        X = A_t @ (V / S.unsqueeze(-2))
        dU = dU + X - U @ (U.mH @ X)
    elif m < n:
        X = A_t.mH @ (U / S.unsqueeze(-2))
        dV = dV + X - V @ (Vh @ X)
    dVh = dV.mH
    if full_matrices:
        dU = torch.cat([dU, dU.new_zeros(U0.shape[:-1] + (m - dU.shape[-1],))], -1)
        pad = Vh0.shape[:-2] + (n - dVh.shape[-2], n)
        dVh = torch.cat([dVh, dVh.new_zeros(pad)], -2)
    return dU, dS, dVh


def svd_grad(grad_U, grad_S, grad_Vh, A, U, S, Vh, full_matrices: bool, compute_uv):
    """Gradient of `_linalg_svd` at A: the adjoint of `svd_tangents`.

    gA = U gP V^H with gP = diag(gS) + (skew(U^H gU) / E) S + S (skew(V^H gV) / E)
    (skew(X) = X - X^H, E as in svd_tangents) plus, for complex A, the diagonal
    i (Im diag(U^H gU) - Im diag(V^H gV)) / (2 S); for m > n add
    (I - U U^H) gU S^-1 V^H, for m < n add U S^-1 gVh (I - V V^H). Gradients of
    the extra columns of a full_matrices U (rows of Vh) are ignored."""
    U, S, Vh = _svd_factors(A, U, S, Vh, full_matrices, compute_uv)
    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    gP = torch.diag_embed(grad_S.to(A.dtype))
    if compute_uv:
        gU, gVh = grad_U[..., :k], grad_Vh[..., :k, :]
        UhgU, VhgV = U.mH @ gU, Vh @ gVh.mH
        E = _gaps(S * S)
        gP = gP + _offdiag(
            (UhgU - UhgU.mH) / E * S.unsqueeze(-2)
            + S.unsqueeze(-1) * ((VhgV - VhgV.mH) / E)
        )
        if A.is_complex():
            imag = UhgU.diagonal(0, -2, -1).imag - VhgV.diagonal(0, -2, -1).imag
            gP = gP + torch.diag_embed(0.5j * imag / S)
        gA = U @ gP @ Vh
        if m > n:
            X = gU / S.unsqueeze(-2)
            gA = gA + (X - U @ (U.mH @ X)) @ Vh
        elif m < n:
            X = gVh / S.unsqueeze(-1)
            gA = gA + U @ (X - (X @ Vh.mH) @ Vh)
        return gA
    return U @ gP @ Vh


def _eigh_vectors(A, L, V, compute_v: bool):
    if compute_v:
        return L, V
    return torch.linalg.eigh(A)


def eigh_tangents(A_t, A_p, L, V, compute_v: bool) -> tuple:
    """Tangents (dL, dV) of `_linalg_eigh` (A = V diag(L) V^H) for the tangent
    A_t, taken as given (like native forward AD, which does not symmetrise it):
    with X = V^H dA V, dL = Re diag(X), dV = V (X / E) off the diagonal,
    E_ij = L_j - L_i (so diag(V^H dV) = 0). Without compute_v, dV is empty like V
    (and V is recomputed to get dL)."""
    V0 = V
    L, V = _eigh_vectors(A_p, L, V, compute_v)
    X = V.mH @ A_t @ V
    dL = X.diagonal(0, -2, -1).real
    if not compute_v:
        return dL, torch.zeros_like(V0)
    return dL, V @ (_offdiag(X) / _gaps(L))


def hermitian_sqrt_differential(X, T):
    """The derivative of the principal square root X of a Hermitian positive-
    definite matrix (`linalg_matrix_sqrth`) in the direction T: the Y with
    X Y + Y X = T, which with X = V diag(s) V^H is V ((V^H T V) / (s_i + s_j)) V^H.
    The map is self-adjoint, so it also gives the gradient from a grad."""
    s, V = torch.linalg.eigh(X)
    C = V.mH @ T.to(V.dtype) @ V
    return V @ (C / (s.unsqueeze(-1) + s.unsqueeze(-2))) @ V.mH


def eigh_grad(grad_L, grad_V, A, L, V, compute_v: bool):
    """Gradient of `_linalg_eigh` at A: the Hermitian part of the adjoint of
    `eigh_tangents` (the gradient native autograd returns), with K = V^H gV:
    V (diag(gL) + ((K - K^H) / (2 E)) off the diagonal) V^H."""
    L, V = _eigh_vectors(A, L, V, compute_v)
    gX = torch.diag_embed(grad_L.to(V.dtype))
    if compute_v:
        K = V.mH @ grad_V
        gX = gX + _offdiag(K - K.mH) / (2 * _gaps(L))
    return V @ gX @ V.mH


def eig_tangents(self_t, L, V) -> tuple:
    """Tangents (dL, dV) of `linalg_eig` (A V = V diag(L), unit-norm columns) for
    the tangent self_t, in the gauge of native forward AD.

    With X = V^-1 dA V: dL = diag(X); dV = V Y - V Re(diag(V^H V Y)), where
    Y = X / E off the diagonal (E_ij = L_j - L_i) and zero on it; the correction
    keeps the columns at unit norm (Re(v_i^H dv_i) = 0)."""
    X = torch.linalg.solve(V, self_t.to(V.dtype) @ V)
    dV = V @ (_offdiag(X) / _gaps(L))
    dV = dV - V * (V.mH @ dV).diagonal(0, -2, -1).real.unsqueeze(-2)
    return X.diagonal(0, -2, -1), dV


def eig_grad(grad_L, grad_V, self, L, V):
    """Gradient of `linalg_eig` at self, the adjoint of `eig_tangents`:
    V^-H (diag(gL) + (V^H g / conj(E)) off the diagonal) V^H with
    g = gV - V Re(diag(V^H gV)); its real part for a real input."""
    VhgV = V.mH @ grad_V
    g = VhgV - (V.mH @ V) * VhgV.diagonal(0, -2, -1).real.unsqueeze(-2)
    gX = torch.diag_embed(grad_L) + _offdiag(g) / _gaps(L).conj()
    gA = torch.linalg.solve(V.mH, gX @ V.mH)
    return as_real_like(gA, self)


def _qr_check(Q, R, mode: str) -> None:
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when "
            "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
            "differentiate through linalg.qr."
        )
    if Q.shape[-2] > R.shape[-1] and mode == "complete":
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and "
            "nrows > ncols."
        )


def qr_tangents(A_t, Q, R, mode: str) -> tuple:
    """Tangents (dQ, dR) of `linalg_qr` (A = QR, diag(R) real) for A_t.

    For m >= n: with D = dA R^-1 and C = Q^H D, Q^H dQ is the skew-Hermitian
    Om = tril(C, -1) - tril(C, -1)^H + i Im diag(C) (dR R^-1 = C - Om is upper
    triangular with a real diagonal), so dR = (C - Om) R and
    dQ = Q Om + (I - Q Q^H) D. For m < n, A = [X | Y] with X square: (dQ, dR1)
    from X, dR2 = Q^H (dY - dQ R2)."""
    _qr_check(Q, R, mode)
    m, n = A_t.shape[-2], A_t.shape[-1]
    if m < n:
        dQ, dR1 = qr_tangents(A_t[..., :m], Q, R[..., :m], mode)
        dR2 = Q.mH @ (A_t[..., m:] - dQ @ R[..., m:])
        return dQ, torch.cat([dR1, dR2], -1)
    D = torch.linalg.solve_triangular(R, A_t, upper=True, left=False)
    C = Q.mH @ D
    low = C.tril(-1)
    Om = low - low.mH
    if C.is_complex():
        Om = Om + torch.diag_embed(1j * C.diagonal(0, -2, -1).imag)
    dR = (C - Om) @ R
    dQ = Q @ Om + D - Q @ (Q.mH @ D)
    return dQ, dR


def qr_grad(grad_Q, grad_R, A, Q, R, mode: str):
    """Gradient of `linalg_qr` at A, the adjoint of `qr_tangents`. For m >= n, with
    M = Q^H gQ - gR R^H: gA = (Q gC + (I - Q Q^H) gQ) R^-H where
    gC = gR R^H + tril(M - M^H, -1) + i Im diag(M). For m < n, A = [X | Y]:
    gY = Q gR2 and gX is that of the square part with gQ - Q gR2 R2^H."""
    _qr_check(Q, R, mode)
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        gR2 = grad_R[..., m:]
        gQ = grad_Q - Q @ (gR2 @ R[..., m:].mH)
        gX = qr_grad(gQ, grad_R[..., :m], A[..., :m], Q, R[..., :m], mode)
        return torch.cat([gX, Q @ gR2], -1)
    M = Q.mH @ grad_Q - grad_R @ R.mH
    gC = grad_R @ R.mH + (M - M.mH).tril(-1)
    if M.is_complex():
        gC = gC + torch.diag_embed(1j * M.diagonal(0, -2, -1).imag)
    G = Q @ gC + grad_Q - Q @ (Q.mH @ grad_Q)
    return torch.linalg.solve_triangular(R.mH, G, upper=False, left=False)


def pinv_tangent(A_t, A_p, pinv):
    """Tangent of the pseudo-inverse P = pinv(A) (of constant rank) for A_t:
    -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P."""
    dAh = A_t.mH
    return (
        -pinv @ A_t @ pinv
        + (pinv @ pinv.mH) @ (dAh - (dAh @ A_p) @ pinv)
        + (dAh - pinv @ (A_p @ dAh)) @ (pinv.mH @ pinv)
    )


def pinv_grad(grad, A, pinv):
    """Gradient of P = pinv(A), the adjoint of `pinv_tangent`:
    -P^H g P^H + (I - A P) g^H P P^H + P^H P g^H (I - P A)."""
    gh = grad.mH
    return (
        -pinv.mH @ grad @ pinv.mH
        + (gh - A @ (pinv @ gh)) @ (pinv @ pinv.mH)
        + (pinv.mH @ pinv) @ (gh - (gh @ pinv) @ A)
    )


def _as_matrix(b, A):
    """b as a matrix: `linalg_lstsq` takes a vector right side when b has one
    dimension less than A."""
    return b.unsqueeze(-1) if b.dim() == A.dim() - 1 else b


def lstsq_self_tangent(self_t, self_p, b_p):
    """Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of A:
    d(pinv A) B (see pinv_tangent)."""
    pinv = torch.linalg.pinv(self_p)
    B = _as_matrix(b_p, self_p)
    X = pinv_tangent(self_t, self_p, pinv) @ B
    return X.squeeze(-1) if B is not b_p else X


def lstsq_b_tangent(b_t, self_p):
    """Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of B."""
    B = _as_matrix(b_t, self_p)
    X = torch.linalg.pinv(self_p) @ B
    return X.squeeze(-1) if B is not b_t else X


def lstsq_grads(grad, grad_residuals, self, b, solution, residuals):
    """Gradients (gA, gB) of `linalg_lstsq`'s solution X = pinv(A) B and residuals:
    gA = pinv_grad(gX B^H, A, pinv(A)), gB = pinv(A)^H gX, plus, where the
    residuals were computed, 2 (r diag(g_res)) X^H for A and -2 r diag(g_res) for B
    (see lstsq_residuals_tangent); summed over broadcast batch dimensions."""
    pinv = torch.linalg.pinv(self)
    B = _as_matrix(b, self)
    vector = B is not b
    g = grad.unsqueeze(-1) if vector else grad
    gA = pinv_grad(g @ B.mH, self, pinv)
    gB = pinv.mH @ g
    if residuals.numel():
        X = solution.unsqueeze(-1) if vector else solution
        weighted = 2 * (self @ X - B) * grad_residuals.unsqueeze(-2)
        gA = gA + weighted @ X.mH
        gB = gB - weighted
    gB = gB.squeeze(-1) if vector else gB
    return unbroadcast(gA, self), unbroadcast(gB, b)


def lstsq_residuals_tangent(self_t, b_t, self_p, b_p, solution, residuals):
    """Tangent of `linalg_lstsq`'s residuals, the squared column norms of
    r = A X - B (computed for m > n with a driver other than gelsy; else empty):
    2 Re sum_rows(conj(r) (dA X - dB)) (the dX term vanishes: A^H r = 0)."""
    if not residuals.numel():
        return torch.zeros_like(residuals)
    B = _as_matrix(b_p, self_p)
    vector = B is not b_p
    X = solution.unsqueeze(-1) if vector else solution
    dB = b_t.unsqueeze(-1) if vector else b_t
    r = self_p @ X - B
    return 2 * (r.conj() * (self_t @ X - dB)).real.sum(-2)
