// C++ twins of dualgen.formulas.quantization (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// Learnable fake quantization (QAT): the tangent of
// _fake_quantize_learnable_per_tensor_affine / _per_channel_affine by autograd's
// straight-through derivatives (the transpose of its backward).
at::Tensor fake_quantize_learnable_per_tensor_tangent(
    const at::Tensor& self_t, const at::Tensor& scale_t,
    const at::Tensor& zero_point_t, const at::Tensor& self, const at::Tensor& scale,
    const at::Tensor& zero_point, int64_t quant_min, int64_t quant_max,
    double grad_factor);
at::Tensor fake_quantize_learnable_per_channel_tangent(
    const at::Tensor& self_t, const at::Tensor& scale_t,
    const at::Tensor& zero_point_t, const at::Tensor& self, const at::Tensor& scale,
    const at::Tensor& zero_point, int64_t axis, int64_t quant_min, int64_t quant_max,
    double grad_factor);

}  // namespace dualgen::formulas
