// C++ twins of dualgen.formulas.elementwise (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

#include <ATen/core/List.h>
#include <c10/util/string_view.h>

namespace dualgen::formulas {

// The real part of `t` when `like` is real and `t` complex, else `t`.
at::Tensor as_real_like(const at::Tensor& t, const at::Tensor& like);
// `grad` summed down to `like`'s shape, real where `like` is real.
at::Tensor unbroadcast(const at::Tensor& grad, const at::Tensor& like);

// `t * factor`, skipping the multiplication when the factor is 1 (alpha, beta).
at::Tensor scale(const at::Tensor& t, const c10::Scalar& factor);
// A tensor factor is never skipped: `t * factor`.
at::Tensor scale(const at::Tensor& t, const at::Tensor& factor);

// A copy of `t` broadcast to `like`'s shape (an expanded view of the copy
// where broadcasting is needed).
at::Tensor copy_broadcast(const at::Tensor& t, const at::Tensor& like);

// A tangent given its primal's shape and layout (its real part where the
// primal is real); undefined where either is undefined.
at::Tensor conform(const at::Tensor& tangent, const at::Tensor& result);

// Zeros in place of the absent (undefined) tangents of a tensor list; an empty
// `tangents` (absent) gives zeros for every tensor of the list.
std::vector<at::Tensor> fill_absent(
    const std::vector<at::Tensor>& tangents,
    const std::vector<at::Tensor>& primals);
// The same for a Tensor?[] list of primals: a None primal keeps its tangent.
std::vector<at::Tensor> fill_absent(
    const std::vector<at::Tensor>& tangents,
    const c10::List<std::optional<at::Tensor>>& primals);

// d maximum(a, b) / d a: 1 where a wins, 1/2 at ties, 0 where b wins.
at::Tensor winner_weight(const at::Tensor& a, const at::Tensor& b);

// d self**exponent / d self = exponent * self**(exponent - 1), 0 where the
// exponent is 0.
at::Tensor pow_self_derivative(const at::Tensor& self, const at::Tensor& exponent);
at::Tensor pow_self_derivative(const at::Tensor& self, const c10::Scalar& exponent);

// d self**exponent / d exponent = result * log(self), 0 where self is 0 and
// the exponent non-negative.
at::Tensor pow_exponent_derivative(
    const at::Tensor& self, const at::Tensor& exponent, const at::Tensor& result);
at::Tensor pow_exponent_derivative(
    const c10::Scalar& self, const at::Tensor& exponent, const at::Tensor& result);

// d clamp(self, min, max) / d self: true inside [min, max] (bounds included).
at::Tensor clamp_mask(
    const at::Tensor& self,
    const std::optional<c10::Scalar>& min,
    const std::optional<c10::Scalar>& max);

// `t` where `self` is finite, 0 elsewhere, part by part for complex `self`.
at::Tensor finite_parts(const at::Tensor& t, const at::Tensor& self);

// d mvlgamma(self, p) / d self: sum of digamma(self - i / 2) over i < p.
at::Tensor mvlgamma_derivative(const at::Tensor& self, int64_t p);

// d logit(self, eps) / d self = 1 / (self (1 - self)); with eps 0 outside
// [eps, 1 - eps], without NaN outside [0, 1].
at::Tensor logit_derivative(const at::Tensor& self, std::optional<double> eps);

// Tangent of angle: Im(conj(z) z_t) / |z|^2 (0 at 0); zero for a real input.
at::Tensor angle_tangent(const at::Tensor& self_t, const at::Tensor& self_p);

// `t` for true division (rounding_mode absent), else zeros.
at::Tensor unless_rounded(
    const at::Tensor& t, std::optional<c10::string_view> rounding_mode);

// Where clamp.Tensor's result took `which` ("self", "min" or "max"): a mask
// (max wins where min > max; an absent bound never does).
at::Tensor clamp_tensor_weight(
    const at::Tensor& self_p,
    const at::Tensor& min_p,
    const at::Tensor& max_p,
    c10::string_view which);

// sgn's derivative applied to v: (v - Re(v conj(sgn z)) sgn z) / |z|, zero at
// z = 0; zero everywhere for a real input.
at::Tensor sgn_derivative(
    const at::Tensor& v, const at::Tensor& self, const at::Tensor& result);

}  // namespace dualgen::formulas
