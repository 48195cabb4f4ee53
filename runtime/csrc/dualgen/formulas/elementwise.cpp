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

// The masks of clamp.Tensor's inputs, by name; undefined where Python's dict
// has no entry.
struct ClampMasks {
  at::Tensor self, min, max;
};

ClampMasks clamp_masks(
    const at::Tensor& self_p, const at::Tensor& min_p, const at::Tensor& max_p) {
  ClampMasks masks;
  if (min_p.defined() && max_p.defined()) {
    at::Tensor crossed = min_p > max_p;
    at::Tensor below = (self_p < min_p).logical_and(crossed.logical_not());
    at::Tensor above = (self_p > max_p).logical_and(below.logical_not());
    masks.self = crossed.logical_or(below).logical_or(above).logical_not();
    masks.min = below;
    masks.max = crossed.logical_or(above);
  } else if (min_p.defined()) {
    masks.self = self_p > min_p;
    masks.min = masks.self.logical_not();
  } else if (max_p.defined()) {
    masks.self = self_p < max_p;
    masks.max = masks.self.logical_not();
  } else {
    masks.self = at::ones_like(self_p, at::TensorOptions().dtype(at::kBool));
  }
  return masks;
}

}  // namespace

at::Tensor unbroadcast(const at::Tensor& grad, const at::Tensor& like) {
  at::Tensor summed = grad;
  if (grad.sizes() != like.sizes()) {
    summed = grad.sum_to_size(like.sizes());
  }
  return as_real_like(summed, like);
}

at::Tensor scale(const at::Tensor& t, const c10::Scalar& factor) {
  return scalar_equals(factor, 1) ? t : t * factor;
}

at::Tensor scale(const at::Tensor& t, const at::Tensor& factor) {
  return t * factor;
}

at::Tensor copy_broadcast(const at::Tensor& t, const at::Tensor& like) {
  at::Tensor copy = t.clone();
  return copy.sizes() == like.sizes() ? copy : copy.expand_as(like);
}

at::Tensor conform(const at::Tensor& tangent, const at::Tensor& result) {
  if (!tangent.defined() || !result.defined()) {
    return at::Tensor();
  }
  at::Tensor real_tangent = as_real_like(tangent, result);
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
  return at::where(exponent == 0, 0.0, derivative);
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

at::Tensor clamp_mask(
    const at::Tensor& self,
    const std::optional<c10::Scalar>& min,
    const std::optional<c10::Scalar>& max) {
  at::Tensor mask = at::ones_like(self, at::TensorOptions().dtype(at::kBool));
  if (min.has_value()) {
    mask = mask & (self >= *min);
  }
  if (max.has_value()) {
    mask = mask & (self <= *max);
  }
  return mask;
}

at::Tensor finite_parts(const at::Tensor& t, const at::Tensor& self) {
  if (!self.is_complex()) {
    return t * self.isfinite();
  }
  at::Tensor real_mask = at::real(self).isfinite();
  at::Tensor imag_mask = at::imag(self).isfinite();
  if (!t.is_complex()) {
    return t * real_mask;
  }
  return at::complex(at::real(t) * real_mask, at::imag(t) * imag_mask);
}

at::Tensor mvlgamma_derivative(const at::Tensor& self, int64_t p) {
  at::Tensor offsets =
      at::arange(p, at::TensorOptions().dtype(self.scalar_type()).device(self.device())) *
      -0.5;
  return (self.unsqueeze(-1) + offsets).digamma().sum(-1);
}

at::Tensor logit_derivative(const at::Tensor& self, std::optional<double> eps) {
  at::Tensor derivative = (self * at::rsub(self, 1)).reciprocal();
  if (!eps.has_value()) {
    return at::where(
        (self < 0).logical_or(self > 1),
        std::numeric_limits<double>::quiet_NaN(),
        derivative);
  }
  return at::where((self < *eps).logical_or(self > 1 - *eps), 0.0, derivative);
}

at::Tensor unless_rounded(
    const at::Tensor& t, std::optional<c10::string_view> rounding_mode) {
  return rounding_mode.has_value() ? at::zeros_like(t) : t;
}

at::Tensor clamp_tensor_weight(
    const at::Tensor& self_p,
    const at::Tensor& min_p,
    const at::Tensor& max_p,
    c10::string_view which) {
  ClampMasks masks = clamp_masks(self_p, min_p, max_p);
  at::Tensor mask;
  if (which == "self") {
    mask = masks.self;
  } else if (which == "min") {
    mask = masks.min;
  } else if (which == "max") {
    mask = masks.max;
  }
  // Python's masks[which] raises KeyError('<which>') for a missing entry.
  TORCH_CHECK(mask.defined(), "'", std::string(which), "'");
  return mask;
}

at::Tensor sgn_derivative(
    const at::Tensor& v, const at::Tensor& self, const at::Tensor& result) {
  if (!self.is_complex()) {
    return at::zeros_like(v, v.options().dtype(self.scalar_type()));
  }
  return at::where(
      self == 0, 0.0, (v - at::real(v * result.conj()) * result) / self.abs());
}

}  // namespace dualgen::formulas
