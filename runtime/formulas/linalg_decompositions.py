"""Helpers for linear algebra: spectral decompositions and least squares.

SVD, eigh, eig and QR (tangents of the factors, gradients from theirs), the
pseudo-inverse and lstsq.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    as_matrix,
    as_real_like,
    eigh_vectors,
    gaps,
    offdiag,
    svd_factors,
    unbroadcast,
)

__all__ = [
    "eig_grad",
    "eigh_grad",
    "lstsq_grads",
    "pinv_grad",
    "qr_grad",
    "qr_tangents",
    "svd_grad",
]


def svd_grad(grad_U, grad_S, grad_Vh, A, U, S, Vh, full_matrices: bool, compute_uv):
    """Gradient of `_linalg_svd` at A: the adjoint of `svd_tangents`.

    gA = U gP V^H with gP = diag(gS) + (skew(U^H gU) / E) S + S (skew(V^H gV) / E)
    (skew(X) = X - X^H, E as in svd_tangents) plus, for complex A, the diagonal
    i (Im diag(U^H gU) - Im diag(V^H gV)) / (2 S); for m > n add
    (I - U U^H) gU S^-1 V^H, for m < n add U S^-1 gVh (I - V V^H). Gradients of
    the extra columns of a full_matrices U (rows of Vh) are ignored."""
    U, S, Vh = svd_factors(A, U, S, Vh, full_matrices, compute_uv)
    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    gP = torch.diag_embed(grad_S.to(A.dtype))
    if compute_uv:
        gU, gVh = grad_U[..., :k], grad_Vh[..., :k, :]
        UhgU, VhgV = U.mH @ gU, Vh @ gVh.mH
        E = gaps(S * S)
        gP = gP + offdiag(
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


def eigh_grad(grad_L, grad_V, A, L, V, compute_v: bool):
    """Gradient of `_linalg_eigh` at A: the Hermitian part of the adjoint of
    `eigh_tangents` (the gradient native autograd returns), with K = V^H gV:
    V (diag(gL) + ((K - K^H) / (2 E)) off the diagonal) V^H."""
    L, V = eigh_vectors(A, L, V, compute_v)
    gX = torch.diag_embed(grad_L.to(V.dtype))
    if compute_v:
        K = V.mH @ grad_V
        gX = gX + offdiag(K - K.mH) / (2 * gaps(L))
    return V @ gX @ V.mH


def eig_grad(grad_L, grad_V, self, L, V):
    """Gradient of `linalg_eig` at self, the adjoint of `eig_tangents`:
    V^-H (diag(gL) + (V^H g / conj(E)) off the diagonal) V^H with
    g = gV - V Re(diag(V^H gV)); its real part for a real input."""
    VhgV = V.mH @ grad_V
    g = VhgV - (V.mH @ V) * VhgV.diagonal(0, -2, -1).real.unsqueeze(-2)
    gX = torch.diag_embed(grad_L) + offdiag(g) / gaps(L).conj()
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


def pinv_grad(grad, A, pinv):
    """Gradient of P = pinv(A), the adjoint of `pinv_tangent`:
    -P^H g P^H + (I - A P) g^H P P^H + P^H P g^H (I - P A)."""
    gh = grad.mH
    return (
        -pinv.mH @ grad @ pinv.mH
        + (gh - A @ (pinv @ gh)) @ (pinv @ pinv.mH)
        + (pinv.mH @ pinv) @ (gh - (gh @ pinv) @ A)
    )


def lstsq_grads(grad, grad_residuals, self, b, solution, residuals):
    """Gradients (gA, gB) of `linalg_lstsq`'s solution X = pinv(A) B and residuals:
    gA = pinv_grad(gX B^H, A, pinv(A)), gB = pinv(A)^H gX, plus, where the
    residuals were computed, 2 (r diag(g_res)) X^H for A and -2 r diag(g_res) for B
    (see lstsq_residuals_tangent); summed over broadcast batch dimensions."""
    pinv = torch.linalg.pinv(self)
    B = as_matrix(b, self)
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
