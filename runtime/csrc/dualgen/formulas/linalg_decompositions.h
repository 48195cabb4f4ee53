// C++ twins of dualgen.formulas.linalg_decompositions (same names, same
// meaning): tangents of SVD, eigh, eig and QR factors, of the pseudo-inverse
// and of lstsq's solution and residuals.
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// Tangents (dU, dS, dVh) of `_linalg_svd` (A = U diag(S) Vh) for A_t, in the
// gauge native forward AD uses; zero tangents for the extra columns of a
// full_matrices U (rows of Vh); without compute_uv, dU and dVh are empty like
// U and Vh.
std::vector<at::Tensor> svd_tangents(
    const at::Tensor& A_t,
    const at::Tensor& A_p,
    const at::Tensor& U,
    const at::Tensor& S,
    const at::Tensor& Vh,
    bool full_matrices,
    bool compute_uv);

// The derivative of the principal square root X of a Hermitian positive-definite
// matrix in the direction T: Y with X Y + Y X = T (self-adjoint: also the
// gradient from a grad).
at::Tensor hermitian_sqrt_differential(const at::Tensor& X, const at::Tensor& T);

// Tangents (dL, dV) of `_linalg_eigh` (A = V diag(L) V^H) for A_t (taken as
// given, not symmetrised); without compute_v, dV is empty like V.
std::vector<at::Tensor> eigh_tangents(
    const at::Tensor& A_t,
    const at::Tensor& A_p,
    const at::Tensor& L,
    const at::Tensor& V,
    bool compute_v);

// Tangents (dL, dV) of `linalg_eig` (A V = V diag(L), unit-norm columns) for
// self_t, in the gauge of native forward AD.
std::vector<at::Tensor> eig_tangents(
    const at::Tensor& self_t, const at::Tensor& L, const at::Tensor& V);

// Tangents (dQ, dR) of `linalg_qr` (A = QR, diag(R) real) for A_t; raises for
// mode='r' and for mode='complete' with nrows > ncols.
std::vector<at::Tensor> qr_tangents(
    const at::Tensor& A_t,
    const at::Tensor& Q,
    const at::Tensor& R,
    c10::string_view mode);

// Tangent of the pseudo-inverse P = pinv(A) (of constant rank) for A_t:
// -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P.
at::Tensor pinv_tangent(
    const at::Tensor& A_t, const at::Tensor& A_p, const at::Tensor& pinv);

// Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of A.
at::Tensor lstsq_self_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, const at::Tensor& b_p);

// Tangent of the `linalg_lstsq` solution X = pinv(A) B for the tangent of B.
at::Tensor lstsq_b_tangent(const at::Tensor& b_t, const at::Tensor& self_p);

// Tangent of `linalg_lstsq`'s residuals (squared column norms of r = A X - B,
// or empty): 2 Re sum_rows(conj(r) (dA X - dB)).
at::Tensor lstsq_residuals_tangent(
    const at::Tensor& self_t,
    const at::Tensor& b_t,
    const at::Tensor& self_p,
    const at::Tensor& b_p,
    const at::Tensor& solution,
    const at::Tensor& residuals);

}  // namespace dualgen::formulas
