#include "formulas.h"  // generated from twins.yaml

#include <tuple>

namespace dualgen::formulas {

namespace {

// `x` with its (batched) diagonal set to zero.
at::Tensor offdiag(const at::Tensor& x) {
  return x - at::diag_embed(x.diagonal(0, -2, -1));
}

// E[..., i, j] = values[j] - values[i], with ones on the diagonal (so that
// dividing an off-diagonal matrix by it leaves the diagonal alone).
at::Tensor gaps(const at::Tensor& values) {
  int64_t k = values.size(-1);
  at::Tensor eye = at::eye(
      k, at::TensorOptions().dtype(values.scalar_type()).device(values.device()));
  return values.unsqueeze(-2) - values.unsqueeze(-1) + eye;
}

// i * t for a real tensor t, as Python's `1j * t` (scaled by `scale`).
at::Tensor times_i(const at::Tensor& t, double scale) {
  return at::mul(t, c10::Scalar(c10::complex<double>(0.0, scale)));
}

// Everything but the last `drop` sizes of `t`, then `extra`.
std::vector<int64_t> leading_sizes(
    const at::Tensor& t, int64_t drop, std::vector<int64_t> extra) {
  auto sizes = t.sizes();
  std::vector<int64_t> out(sizes.begin(), sizes.end() - drop);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// The thin factors (U with k columns, Vh with k rows, k = min(m, n)) of an SVD
// output; recomputed when the op ran with compute_uv=False (svdvals).
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_factors(
    const at::Tensor& A,
    at::Tensor U,
    at::Tensor S,
    at::Tensor Vh,
    bool full_matrices,
    bool compute_uv) {
  if (!compute_uv) {
    std::tie(U, S, Vh) = at::linalg_svd(A, /*full_matrices=*/false);
  }
  int64_t k = S.size(-1);
  if (full_matrices) {
    U = U.slice(-1, 0, k);
    Vh = Vh.slice(-2, 0, k);
  }
  return {U, S, Vh};
}

// The in-span parts of svd_tangents: dU = U ((dP S + S dP^H) / E) and
// dV = V ((S dP + dP^H S) / E) off the diagonal, plus the split phase of
// complex singular pairs. Returns (dU, dV).
std::pair<at::Tensor, at::Tensor> svd_in_span(
    const at::Tensor& dP,
    const at::Tensor& U,
    const at::Tensor& S,
    const at::Tensor& V) {
  at::Tensor E = gaps(S * S);
  at::Tensor off = offdiag(dP);
  at::Tensor dU =
      at::matmul(U, (off * S.unsqueeze(-2) + S.unsqueeze(-1) * off.mH()) / E);
  at::Tensor dV =
      at::matmul(V, (S.unsqueeze(-1) * off + off.mH() * S.unsqueeze(-2)) / E);
  if (dP.is_complex()) {
    at::Tensor phase = times_i(at::imag(dP.diagonal(0, -2, -1)), 0.5) / S;
    dU = dU + U * phase.unsqueeze(-2);
    dV = dV - V * phase.unsqueeze(-2);
  }
  return {dU, dV};
}

// The thin SVD factors' tangents padded with zeros for the extra columns of a
// full_matrices U0 (rows of Vh0). Returns (dU, dVh).
std::pair<at::Tensor, at::Tensor> svd_pad_full(
    const at::Tensor& dU,
    const at::Tensor& dVh,
    const at::Tensor& U0,
    const at::Tensor& Vh0,
    int64_t m,
    int64_t n) {
  at::Tensor U_zeros = dU.new_zeros(leading_sizes(U0, 1, {m - dU.size(-1)}));
  at::Tensor Vh_zeros =
      dVh.new_zeros(leading_sizes(Vh0, 2, {n - dVh.size(-2), n}));
  return {at::cat({dU, U_zeros}, -1), at::cat({dVh, Vh_zeros}, -2)};
}

// (L, V) of an eigh output; recomputed when the op ran without compute_v.
std::pair<at::Tensor, at::Tensor> eigh_vectors(
    const at::Tensor& A, const at::Tensor& L, const at::Tensor& V, bool compute_v) {
  if (compute_v) {
    return {L, V};
  }
  auto [L2, V2] = at::linalg_eigh(A);
  return {L2, V2};
}

void qr_check(const at::Tensor& Q, const at::Tensor& R, c10::string_view mode) {
  TORCH_CHECK(
      mode != "r",
      "The derivative of linalg.qr depends on Q, which is not computed when "
      "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
      "differentiate through linalg.qr.");
  TORCH_CHECK(
      !(Q.size(-2) > R.size(-1) && mode == "complete"),
      "The QR decomposition is not differentiable when mode='complete' and "
      "nrows > ncols.");
}

// torch.linalg.pinv(A) with its defaults (no atol, rtol; not hermitian).
at::Tensor pinv_of(const at::Tensor& A) {
  return at::linalg_pinv(
      A, std::optional<at::Tensor>(), std::optional<at::Tensor>(), false);
}

// b as a matrix: `linalg_lstsq` takes a vector right side when b has one
// dimension less than A. `vector` tells whether b was unsqueezed.
at::Tensor as_matrix(const at::Tensor& b, const at::Tensor& A, bool& vector) {
  vector = b.dim() == A.dim() - 1;
  return vector ? b.unsqueeze(-1) : b;
}

}  // namespace

std::vector<at::Tensor> svd_tangents(
    const at::Tensor& A_t,
    const at::Tensor& A_p,
    const at::Tensor& U0,
    const at::Tensor& S0,
    const at::Tensor& Vh0,
    bool full_matrices,
    bool compute_uv) {
  auto [U, S, Vh] = svd_factors(A_p, U0, S0, Vh0, full_matrices, compute_uv);
  at::Tensor V = Vh.mH();
  int64_t m = A_t.size(-2), n = A_t.size(-1);
  at::Tensor dP = m >= n ? at::matmul(U.mH(), at::matmul(A_t, V))
                         : at::matmul(at::matmul(U.mH(), A_t), V);
  at::Tensor dS = at::real(dP.diagonal(0, -2, -1));
  if (!compute_uv) {
    return {at::zeros_like(U0), dS, at::zeros_like(Vh0)};
  }
  auto [dU, dV] = svd_in_span(dP, U, S, V);
  if (m > n) {
    at::Tensor X = at::matmul(A_t, V / S.unsqueeze(-2));
    dU = dU + X - at::matmul(U, at::matmul(U.mH(), X));
  } else if (m < n) {
    at::Tensor X = at::matmul(A_t.mH(), U / S.unsqueeze(-2));
    dV = dV + X - at::matmul(V, at::matmul(Vh, X));
  }
  at::Tensor dVh = dV.mH();
  if (full_matrices) {
    std::tie(dU, dVh) = svd_pad_full(dU, dVh, U0, Vh0, m, n);
  }
  return {dU, dS, dVh};
}

at::Tensor hermitian_sqrt_differential(const at::Tensor& X, const at::Tensor& T) {
  auto [s, V] = at::linalg_eigh(X);
  const at::Tensor C = at::matmul(at::matmul(V.mH(), T.to(V.scalar_type())), V);
  return at::matmul(at::matmul(V, C / (s.unsqueeze(-1) + s.unsqueeze(-2))), V.mH());
}

std::vector<at::Tensor> eigh_tangents(
    const at::Tensor& A_t,
    const at::Tensor& A_p,
    const at::Tensor& L0,
    const at::Tensor& V0,
    bool compute_v) {
  auto [L, V] = eigh_vectors(A_p, L0, V0, compute_v);
  at::Tensor X = at::matmul(at::matmul(V.mH(), A_t), V);
  at::Tensor dL = at::real(X.diagonal(0, -2, -1));
  if (!compute_v) {
    return {dL, at::zeros_like(V0)};
  }
  return {dL, at::matmul(V, offdiag(X) / gaps(L))};
}

std::vector<at::Tensor> eig_tangents(
    const at::Tensor& self_t, const at::Tensor& L, const at::Tensor& V) {
  at::Tensor X =
      at::linalg_solve(V, at::matmul(self_t.to(V.scalar_type()), V));
  at::Tensor dV = at::matmul(V, offdiag(X) / gaps(L));
  dV = dV -
      V * at::real(at::matmul(V.mH(), dV).diagonal(0, -2, -1)).unsqueeze(-2);
  return {X.diagonal(0, -2, -1), dV};
}

std::vector<at::Tensor> qr_tangents(
    const at::Tensor& A_t,
    const at::Tensor& Q,
    const at::Tensor& R,
    c10::string_view mode) {
  qr_check(Q, R, mode);
  int64_t m = A_t.size(-2), n = A_t.size(-1);
  if (m < n) {
    auto square = qr_tangents(A_t.slice(-1, 0, m), Q, R.slice(-1, 0, m), mode);
    const at::Tensor& dQ = square[0];
    at::Tensor dR2 = at::matmul(
        Q.mH(), A_t.slice(-1, m) - at::matmul(dQ, R.slice(-1, m)));
    return {dQ, at::cat({square[1], dR2}, -1)};
  }
  at::Tensor D = at::linalg_solve_triangular(
      R, A_t, /*upper=*/true, /*left=*/false);
  at::Tensor C = at::matmul(Q.mH(), D);
  at::Tensor low = C.tril(-1);
  at::Tensor Om = low - low.mH();
  if (C.is_complex()) {
    Om = Om + at::diag_embed(times_i(at::imag(C.diagonal(0, -2, -1)), 1.0));
  }
  at::Tensor dR = at::matmul(C - Om, R);
  at::Tensor dQ = at::matmul(Q, Om) + D - at::matmul(Q, at::matmul(Q.mH(), D));
  return {dQ, dR};
}

at::Tensor pinv_tangent(
    const at::Tensor& A_t, const at::Tensor& A_p, const at::Tensor& pinv) {
  at::Tensor dAh = A_t.mH();
  return at::matmul(at::matmul(at::neg(pinv), A_t), pinv) +
      at::matmul(
             at::matmul(pinv, pinv.mH()),
             dAh - at::matmul(at::matmul(dAh, A_p), pinv)) +
      at::matmul(
             dAh - at::matmul(pinv, at::matmul(A_p, dAh)),
             at::matmul(pinv.mH(), pinv));
}

at::Tensor lstsq_self_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, const at::Tensor& b_p) {
  at::Tensor pinv = pinv_of(self_p);
  bool vector = false;
  at::Tensor B = as_matrix(b_p, self_p, vector);
  at::Tensor X = at::matmul(pinv_tangent(self_t, self_p, pinv), B);
  return vector ? X.squeeze(-1) : X;
}

at::Tensor lstsq_b_tangent(const at::Tensor& b_t, const at::Tensor& self_p) {
  bool vector = false;
  at::Tensor B = as_matrix(b_t, self_p, vector);
  at::Tensor X = at::matmul(pinv_of(self_p), B);
  return vector ? X.squeeze(-1) : X;
}

at::Tensor lstsq_residuals_tangent(
    const at::Tensor& self_t,
    const at::Tensor& b_t,
    const at::Tensor& self_p,
    const at::Tensor& b_p,
    const at::Tensor& solution,
    const at::Tensor& residuals) {
  if (residuals.numel() == 0) {
    return at::zeros_like(residuals);
  }
  bool vector = false;
  at::Tensor B = as_matrix(b_p, self_p, vector);
  at::Tensor X = vector ? solution.unsqueeze(-1) : solution;
  at::Tensor dB = vector ? b_t.unsqueeze(-1) : b_t;
  at::Tensor r = at::matmul(self_p, X) - B;
  at::Tensor sum =
      at::real(r.conj() * (at::matmul(self_t, X) - dB)).sum(-2);
  return at::mul(sum, 2);
}

}  // namespace dualgen::formulas
