// C++ twins of dualgen.formulas.linalg_solves (same names, same meaning):
// tangents of linalg.solve, triangular solves, Cholesky (factor, solve,
// inverse), det and slogdet, LU (factor, unpack, solve), the matrix
// exponential and Householder products.
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// The triangle of the last two dims an `upper`/lower triangular op reads: triu
// or tril, without the diagonal when `unitriangular`.
at::Tensor triangular_part(const at::Tensor& t, bool upper,
                           bool unitriangular = false);

// `m @ x` when `left`, else `x @ m`.
at::Tensor side_matmul(const at::Tensor& m, const at::Tensor& x, bool left);

// Tangent of X = A^{-1} B (`left`) or B A^{-1} (A factored again); vector
// right-hand sides as linalg.solve reads them.
at::Tensor linalg_solve_tangent(const at::Tensor& A_t, const at::Tensor& B_t,
                                const at::Tensor& A, const at::Tensor& B,
                                const at::Tensor& result, bool left);

// Tangent of triangular_solve's solution X of op(A) X = B:
// op(A)^{-1}(dB - op(dA') X), dA' the triangle of dA the op reads.
at::Tensor triangular_solve_tangent(const at::Tensor& B_t,
                                    const at::Tensor& A_t, const at::Tensor& A,
                                    const at::Tensor& solution, bool upper,
                                    bool transpose, bool unitri);

// Tangent of the Cholesky factor: dL = L phi(L^{-1} dA L^{-H}).
at::Tensor cholesky_tangent(const at::Tensor& A_t, const at::Tensor& L,
                            bool upper);

// Tangent of X = (L L^H)^{-1} B (U^H U when `upper`).
at::Tensor cholesky_solve_tangent(const at::Tensor& B_t, const at::Tensor& L_t,
                                  const at::Tensor& L, const at::Tensor& result,
                                  bool upper);

// Tangent of R = (L L^H)^{-1} (U^H U when `upper`): -R d(L L^H) R.
at::Tensor cholesky_inverse_tangent(const at::Tensor& L_t, const at::Tensor& L,
                                    const at::Tensor& result, bool upper);

// Tangent of det(A): det * tr(A^{-1} dA) (A factored again); at a singular A,
// the limit tr(adj(A) dA).
at::Tensor det_tangent(const at::Tensor& A_t, const at::Tensor& A,
                       const at::Tensor& det);

// Tangents {sign, logabsdet} of slogdet.
std::vector<at::Tensor> slogdet_tangents(const at::Tensor& A_t,
                                         const at::Tensor& A,
                                         const at::Tensor& sign);

// Tangents {dL, dU} of A = P L U (any m, n).
std::vector<at::Tensor> lu_tangents(const at::Tensor& A_t, const at::Tensor& P,
                                    const at::Tensor& L, const at::Tensor& U);

// {L, U} parts of a packed LU (also lu_unpack's tangents).
std::vector<at::Tensor> lu_unpack_tangents(const at::Tensor& LU_t);

// Tangent of linalg.lu_factor's packed LU.
at::Tensor lu_factor_tangent(const at::Tensor& A_t, const at::Tensor& LU,
                             const at::Tensor& pivots);

// Tangent of the LU that _linalg_det and _linalg_slogdet save (of A, or of A^T
// for a real contiguous A).
at::Tensor det_lu_tangent(const at::Tensor& A_t, const at::Tensor& A,
                          const at::Tensor& LU, const at::Tensor& pivots);

// Tangent of linalg.lu_solve, X = op(A)^{-1} B (or B op(A)^{-1}).
at::Tensor lu_solve_tangent(const at::Tensor& LU_t, const at::Tensor& B_t,
                            const at::Tensor& LU, const at::Tensor& pivots,
                            const at::Tensor& result, bool left, bool adjoint);

// The Frechet derivative of the matrix exponential at A (A^H when `adjoint`)
// in direction E.
at::Tensor matrix_exp_differential(const at::Tensor& A, const at::Tensor& E,
                                   bool adjoint);

// Tangent of Q = (H_1 ... H_k)[:, :n], H_i = I - tau_i v_i v_i^H.
at::Tensor householder_product_tangent(const at::Tensor& input_t,
                                       const at::Tensor& tau_t,
                                       const at::Tensor& input,
                                       const at::Tensor& tau);

}  // namespace dualgen::formulas
