#include "formulas.h"  // generated from twins.yaml

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace dualgen::formulas {

namespace {

// Python's `s == value` for a Python number s (True == 1, 1+0j == 1).
bool scalar_equals(const c10::Scalar& s, int64_t value) {
  if (s.isBoolean()) {
    return static_cast<int64_t>(s.toBool()) == value;
  }
  return s.equal(value);
}

// Python's `s - 1` for a Python number s (bool and int stay integral).
c10::Scalar scalar_minus_one(const c10::Scalar& s) {
  if (s.isComplex()) {
    return c10::Scalar(s.toComplexDouble() - c10::complex<double>(1.0, 0.0));
  }
  if (s.isFloatingPoint()) {
    return c10::Scalar(s.toDouble() - 1.0);
  }
  if (s.isBoolean()) {
    return c10::Scalar(static_cast<int64_t>(s.toBool()) - 1);
  }
  return c10::Scalar(s.toLong() - 1);
}

// result * log(base), 0 where base is 0 and the exponent non-negative.
at::Tensor exponent_derivative_from_base(
    const at::Tensor& base, const at::Tensor& exponent, const at::Tensor& result) {
  at::Tensor derivative = result * base.log();
  at::Tensor non_negative =
      exponent.is_complex() ? at::real(exponent) >= 0 : exponent >= 0;
  at::Tensor at_zero = (base == 0) & non_negative;
  return at::where(at_zero, 0.0, derivative);
}

}  // namespace

at::Tensor scale(const at::Tensor& t, const c10::Scalar& factor) {
  return scalar_equals(factor, 1) ? t : t * factor;
}

at::Tensor scale(const at::Tensor& t, const at::Tensor& factor) {
  return t * factor;
}

at::Tensor conform(const at::Tensor& tangent, const at::Tensor& result) {
  if (!tangent.defined() || !result.defined()) {
    return at::Tensor();
  }
  at::Tensor real_tangent = as_real_like(tangent, result);
  if (real_tangent.is_nested() || result.is_nested()) {
    // (A nested tensor has no sizes: an op's nested tangent has its output's
    // components; a dense one is broadcast into them.)
    if (real_tangent.is_nested()) return real_tangent;
    return at::zeros_like(result, at::TensorOptions().dtype(real_tangent.scalar_type())) +
           real_tangent;
  }
  if (real_tangent.sizes() == result.sizes()) {
    return real_tangent;
  }
  return at::empty_like(
             result, at::TensorOptions().dtype(real_tangent.scalar_type()))
      .copy_(real_tangent);
}

std::vector<at::Tensor> fill_absent(
    const std::vector<at::Tensor>& tangents,
    const std::vector<at::Tensor>& primals) {
  const bool absent = tangents.empty();
  const size_t n = absent ? primals.size() : std::min(tangents.size(), primals.size());
  std::vector<at::Tensor> filled;
  filled.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor t = absent ? at::Tensor() : tangents[i];
    const at::Tensor& p = primals[i];
    filled.push_back(!t.defined() && p.defined() ? at::zeros_like(p) : t);
  }
  return filled;
}

std::vector<at::Tensor> fill_absent(
    const std::vector<at::Tensor>& tangents,
    const c10::List<std::optional<at::Tensor>>& primals) {
  std::vector<at::Tensor> dense;
  dense.reserve(primals.size());
  for (const std::optional<at::Tensor>& p : primals) {
    dense.push_back(p.has_value() ? *p : at::Tensor());
  }
  return fill_absent(tangents, dense);
}

at::Tensor pow_self_derivative(const at::Tensor& self, const at::Tensor& exponent) {
  at::Tensor derivative = exponent * self.pow(exponent - 1);
  // (0 * self^-1 is 0 already where finite, with its exponent derivative kept)
  at::Tensor undefined = (exponent == 0).logical_and(derivative.isfinite().logical_not());
  return at::where(undefined, 0.0, derivative);
}

at::Tensor pow_self_derivative(const at::Tensor& self, const c10::Scalar& exponent) {
  at::Tensor derivative = exponent * self.pow(scalar_minus_one(exponent));
  return scalar_equals(exponent, 0) ? at::zeros_like(derivative) : derivative;
}

at::Tensor pow_exponent_derivative(
    const at::Tensor& self, const at::Tensor& exponent, const at::Tensor& result) {
  return exponent_derivative_from_base(self, exponent, result);
}

at::Tensor pow_exponent_derivative(
    const c10::Scalar& self, const at::Tensor& exponent, const at::Tensor& result) {
  // torch.tensor(self, dtype=result.dtype): a 0-d CPU tensor.
  at::Tensor base =
      at::scalar_tensor(self, at::TensorOptions().dtype(result.scalar_type()));
  return exponent_derivative_from_base(base, exponent, result);
}

at::Tensor mvlgamma_derivative(const at::Tensor& self, int64_t p) {
  at::Tensor offsets =
      at::arange(p, at::TensorOptions().dtype(self.scalar_type()).device(self.device())) *
      -0.5;
  return (self.unsqueeze(-1) + offsets).digamma().sum(-1);
}

}  // namespace dualgen::formulas
