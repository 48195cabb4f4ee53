#include "formulas.h"  // generated from twins.yaml

namespace dualgen::formulas {

namespace {

// i * t for a real tensor t, as Python's `1j * t` (scaled by `scale`).
at::Tensor times_i(const at::Tensor& t, double scale) {
  return at::mul(t, c10::Scalar(c10::complex<double>(0.0, scale)));
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

}  // namespace

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

}  // namespace dualgen::formulas
