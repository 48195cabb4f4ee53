#include "formulas.h"  // generated from twins.yaml

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
