#include "formulas.h"  // generated from twins.yaml

#include <ATen/Dispatch.h>

#include <algorithm>
#include <limits>


namespace dualgen::formulas {

namespace {

// Dims of `t` without the last two (its batch shape).
std::vector<int64_t> batch_shape(const at::Tensor& t) {
  auto sizes = t.sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end() - 2);
}

// The identity (rows x cols) with `like`'s dtype (and device).
at::Tensor eye_like(int64_t rows, int64_t cols, const at::Tensor& like) {
  return at::eye(rows, cols,
                 at::TensorOptions().dtype(like.scalar_type()).device(
                     like.device()));
}

// linalg.solve's rule: B is a (batch of) vector(s) when it is 1-d or has A's
// shape without the last dim.
bool is_vector_rhs(const at::Tensor& A, const at::Tensor& B) {
  return B.dim() == 1 ||
         (B.dim() == A.dim() - 1 && B.sizes() == A.sizes().slice(0, A.dim() - 1));
}

// The lower triangle with half the diagonal (self-adjoint).
at::Tensor phi(const at::Tensor& m) {
  return m.tril() - 0.5 * at::diag_embed(m.diagonal(0, -2, -1));
}

// d(L L^H) (or d(U^H U)), reading the factor's triangle only.
at::Tensor cholesky_product_tangent(const at::Tensor& L_t, const at::Tensor& L,
                                    bool upper) {
  at::Tensor L_ = triangular_part(L, upper);
  at::Tensor dL = triangular_part(L_t, upper);
  at::Tensor k = upper ? dL.mH().matmul(L_) : dL.matmul(L_.mH());
  return k + k.mH();
}

// torch.finfo(dtype).eps for a floating or complex dtype (of its real part).
double finfo_eps(at::ScalarType dtype) {
  double eps = 0.0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, c10::toRealValueType(dtype), "finfo_eps", [&] {
        eps = static_cast<double>(std::numeric_limits<scalar_t>::epsilon());
      });
  return eps;
}

// Zero pivots moved to eps, as native does: det is smooth, so its derivative
// at a singular matrix is the limit of nearby ones.
at::Tensor lu_nonsingular(const at::Tensor& LU) {
  at::Tensor d = LU.diagonal(0, -2, -1);
  double eps = finfo_eps(d.scalar_type());
  return LU + at::diag_embed(at::where(d == 0, eps, 0.0).to(LU.scalar_type()));
}

// _linalg_det and _linalg_slogdet factor A^T when A is real and contiguous.
bool det_lu_is_of_transpose(const at::Tensor& A) {
  return A.is_contiguous() && !A.is_complex();
}

// The LU factorization of A, computed again rather than read from the op's
// saved output (linalg_solves.py says why).
std::pair<at::Tensor, at::Tensor> factor(const at::Tensor& A) {
  auto [LU, pivots, info] = at::linalg_lu_factor_ex(A);
  return {LU, pivots};
}

// tr(A^{-1} dA) from the LU of A.
at::Tensor trace_inv_times(const at::Tensor& A_t, const at::Tensor& LU,
                           const at::Tensor& pivots) {
  at::Tensor solved = at::linalg_lu_solve(lu_nonsingular(LU), pivots, A_t);
  return solved.diagonal(0, -2, -1).sum(at::IntArrayRef{-1});
}

// det, or where it is 0, the determinant with zero pivots moved to eps.
at::Tensor det_or_limit(const at::Tensor& det, const at::Tensor& LU,
                        const at::Tensor& pivots) {
  int64_t k = LU.size(-1);
  at::Tensor swaps =
      (pivots != at::arange(1, k + 1, pivots.options())).sum(at::IntArrayRef{-1});
  at::Tensor sign = at::rsub(2 * (swaps % 2), 1).to(LU.scalar_type());
  at::Tensor nudged = sign * lu_nonsingular(LU).diagonal(0, -2, -1).prod(-1);
  return at::where(det == 0, nudged, det);
}

// Gradient of a packed LU from those of its unpacked L and U (the adjoint of
// `lu_unpack_tangents`), as Python's lu_unpack_grad.
at::Tensor lu_unpack_grad(const at::Tensor& grad_L, const at::Tensor& grad_U,
                          const at::Tensor& LU) {
  int64_t m = LU.size(-2), n = LU.size(-1);
  int64_t k = std::min(m, n);
  at::Tensor g =
      at::zeros_like(LU, at::TensorOptions().dtype(grad_L.scalar_type()));
  g = g + at::pad(grad_L.tril(-1), {0, n - k});
  return g + at::pad(grad_U.triu(), {0, 0, 0, m - k});
}

// The first k reflector vectors: below the diagonal from input, 1 on it.
at::Tensor householder_vectors(const at::Tensor& input, int64_t k) {
  at::Tensor v = input.slice(-1, 0, k).tril(-1);
  at::Tensor eye = eye_like(input.size(-2), k, input);
  return v + eye;
}

// tau[..., i, None, None]
at::Tensor column_scalar(const at::Tensor& tau, int64_t i) {
  return tau.select(-1, i).unsqueeze(-1).unsqueeze(-1);
}

}  // namespace

at::Tensor triangular_part(const at::Tensor& t, bool upper,
                           bool unitriangular) {
  if (upper) {
    return t.triu(unitriangular ? 1 : 0);
  }
  return t.tril(unitriangular ? -1 : 0);
}

at::Tensor side_matmul(const at::Tensor& m, const at::Tensor& x, bool left) {
  return left ? m.matmul(x) : x.matmul(m);
}

at::Tensor linalg_solve_tangent(const at::Tensor& A_t, const at::Tensor& B_t,
                                const at::Tensor& A, const at::Tensor& B,
                                const at::Tensor& result, bool left) {
  bool vector = is_vector_rhs(A, B);
  at::Tensor X = vector ? result.unsqueeze(-1) : result;
  at::Tensor dB = vector ? B_t.unsqueeze(-1) : B_t;
  at::Tensor rhs = dB - side_matmul(A_t, X, left);
  auto [LU, pivots] = factor(A);
  at::Tensor dX = at::linalg_lu_solve(LU, pivots, rhs, left);
  return vector ? dX.squeeze(-1) : dX;
}

at::Tensor triangular_solve_tangent(const at::Tensor& B_t,
                                    const at::Tensor& A_t, const at::Tensor& A,
                                    const at::Tensor& solution, bool upper,
                                    bool transpose, bool unitri) {
  at::Tensor dA = triangular_part(A_t, upper, unitri);
  at::Tensor rhs = B_t - (transpose ? dA.mT() : dA).matmul(solution);
  return std::get<0>(at::triangular_solve(rhs, A, upper, transpose, unitri));
}

at::Tensor cholesky_tangent(const at::Tensor& A_t, const at::Tensor& L,
                            bool upper) {
  at::Tensor L_ = upper ? L.mH() : L;
  at::Tensor m = at::linalg_solve_triangular(L_, A_t, /*upper=*/false,
                                             /*left=*/true);
  m = at::linalg_solve_triangular(L_.mH(), m, /*upper=*/true, /*left=*/false);
  at::Tensor dL = L_.matmul(phi(m));
  return upper ? dL.mH() : dL;
}

at::Tensor cholesky_solve_tangent(const at::Tensor& B_t, const at::Tensor& L_t,
                                  const at::Tensor& L, const at::Tensor& result,
                                  bool upper) {
  at::Tensor rhs =
      B_t - cholesky_product_tangent(L_t, L, upper).matmul(result);
  return at::cholesky_solve(rhs, L, upper);
}

at::Tensor cholesky_inverse_tangent(const at::Tensor& L_t, const at::Tensor& L,
                                    const at::Tensor& result, bool upper) {
  return -result.matmul(cholesky_product_tangent(L_t, L, upper))
              .matmul(result);
}

at::Tensor det_tangent(const at::Tensor& A_t, const at::Tensor& A,
                       const at::Tensor& det) {
  auto [LU, pivots] = factor(A);
  at::Tensor scale = det_or_limit(det, LU, pivots);
  return scale * trace_inv_times(A_t, LU, pivots);
}

std::vector<at::Tensor> slogdet_tangents(const at::Tensor& A_t,
                                         const at::Tensor& A,
                                         const at::Tensor& sign) {
  auto [LU, pivots] = factor(A);
  at::Tensor t = trace_inv_times(A_t, LU, pivots);
  if (!t.is_complex()) {
    return {at::zeros_like(sign), t};
  }
  at::Tensor i_imag = at::mul(at::imag(t), c10::complex<double>(0.0, 1.0));
  return {sign * i_imag, at::real(t)};
}

std::vector<at::Tensor> lu_tangents(const at::Tensor& A_t, const at::Tensor& P,
                                    const at::Tensor& L, const at::Tensor& U) {
  int64_t m = L.size(-2), n = U.size(-1);
  int64_t k = std::min(m, n);
  at::Tensor E = P.mT().matmul(A_t);
  at::Tensor L1 = L.slice(-2, 0, k), U1 = U.slice(-1, 0, k);
  at::Tensor M = at::linalg_solve_triangular(
      L1, E.slice(-2, 0, k).slice(-1, 0, k), /*upper=*/false, /*left=*/true,
      /*unitriangular=*/true);
  M = at::linalg_solve_triangular(U1, M, /*upper=*/true, /*left=*/false);
  at::Tensor dL = L1.matmul(M.tril(-1));
  at::Tensor dU = M.triu().matmul(U1);
  if (m < n) {
    at::Tensor rest = E.slice(-1, k) - dL.matmul(U.slice(-1, k));
    rest = at::linalg_solve_triangular(L1, rest, /*upper=*/false,
                                       /*left=*/true, /*unitriangular=*/true);
    dU = at::cat({dU, rest}, -1);
  } else if (m > n) {
    at::Tensor rest = E.slice(-2, k) - L.slice(-2, k).matmul(dU);
    rest = at::linalg_solve_triangular(U1, rest, /*upper=*/true,
                                       /*left=*/false);
    dL = at::cat({dL, rest}, -2);
  }
  return {dL, dU};
}

std::vector<at::Tensor> lu_unpack_tangents(const at::Tensor& LU_t) {
  int64_t k = std::min(LU_t.size(-2), LU_t.size(-1));
  return {LU_t.slice(-1, 0, k).tril(-1), LU_t.slice(-2, 0, k).triu()};
}

at::Tensor lu_factor_tangent(const at::Tensor& A_t, const at::Tensor& LU,
                             const at::Tensor& pivots) {
  auto [P, L, U] = at::lu_unpack(LU, pivots);
  std::vector<at::Tensor> dLU = lu_tangents(A_t, P, L, U);
  return lu_unpack_grad(dLU[0], dLU[1], LU);
}

at::Tensor det_lu_tangent(const at::Tensor& A_t, const at::Tensor& A,
                          const at::Tensor& LU, const at::Tensor& pivots) {
  return lu_factor_tangent(det_lu_is_of_transpose(A) ? A_t.mT() : A_t, LU,
                           pivots);
}

at::Tensor lu_solve_tangent(const at::Tensor& LU_t, const at::Tensor& B_t,
                            const at::Tensor& LU, const at::Tensor& pivots,
                            const at::Tensor& result, bool left, bool adjoint) {
  auto [P, L, U] = at::lu_unpack(LU, pivots);
  std::vector<at::Tensor> dLU = lu_unpack_tangents(LU_t);
  at::Tensor dA = P.matmul(dLU[0].matmul(U) + L.matmul(dLU[1]));
  at::Tensor rhs = B_t - side_matmul(adjoint ? dA.mH() : dA, result, left);
  return at::linalg_lu_solve(LU, pivots, rhs, left, adjoint);
}

at::Tensor matrix_exp_differential(const at::Tensor& A_in,
                                   const at::Tensor& E_in, bool adjoint) {
  at::Tensor A = adjoint ? A_in.mH() : A_in;
  at::Tensor E = A.is_complex() ? E_in.to(A.scalar_type()) : E_in;
  at::Tensor top = at::cat({A, E}, -1);
  at::Tensor bottom = at::cat({at::zeros_like(A), A}, -1);
  int64_t n = A.size(-1);
  return at::linalg_matrix_exp(at::cat({top, bottom}, -2))
      .slice(-2, 0, n)
      .slice(-1, n);
}

at::Tensor householder_product_tangent(const at::Tensor& input_t,
                                       const at::Tensor& tau_t,
                                       const at::Tensor& input,
                                       const at::Tensor& tau) {
  int64_t m = input.size(-2), n = input.size(-1), k = tau.size(-1);
  at::Tensor V = householder_vectors(input, k);
  at::Tensor dV = input_t.slice(-1, 0, k).tril(-1);
  std::vector<int64_t> shape = batch_shape(input);
  shape.insert(shape.end(), {m, m});
  at::Tensor Q = eye_like(m, m, input).expand(shape);
  at::Tensor dQ = at::zeros_like(Q);
  for (int64_t i = 0; i < k; ++i) {
    at::Tensor v = V.slice(-1, i, i + 1), dv = dV.slice(-1, i, i + 1);
    at::Tensor t = column_scalar(tau, i), dt = column_scalar(tau_t, i);
    at::Tensor vvH = v.matmul(v.mH());
    at::Tensor H = eye_like(m, m, input) - t * vvH;
    at::Tensor dH = -dt * vvH - t * (dv.matmul(v.mH()) + v.matmul(dv.mH()));
    dQ = dQ.matmul(H) + Q.matmul(dH);
    Q = Q.matmul(H);
  }
  return dQ.slice(-1, 0, n);
}

}  // namespace dualgen::formulas
