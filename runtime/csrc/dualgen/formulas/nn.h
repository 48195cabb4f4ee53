// C++ twins of dualgen.formulas.nn (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// A loss's reduction (0: none, 1: mean, 2: sum) applied to element-wise terms.
at::Tensor apply_loss_reduction(const at::Tensor& t, int64_t reduction);
// Backward of apply_loss_reduction: the gradient of the reduced loss spread
// over the element-wise terms shaped like `like`.
at::Tensor expand_loss_grad(
    const at::Tensor& grad, const at::Tensor& like, int64_t reduction);

// A per-channel vector [C] viewed as [C, 1, ..., 1] so that it broadcasts
// against a [N, C, *] tensor of `ndim` dimensions.
at::Tensor channel_view(const at::Tensor& t, int64_t ndim);
// Twin of nn._group_shape: [N, group, C / group * HxW] of a [N, C, *] tensor,
// written out so that empty inputs reshape too.
std::vector<int64_t> group_shape(const at::Tensor& t, int64_t group);

// native_layer_norm's normalized input (before weight and bias).
at::Tensor layer_norm_xhat(
    const at::Tensor& input_p, at::IntArrayRef normalized_shape, double eps);
// Tangent of native_layer_norm's normalized input (before weight and bias)
// from the input's tangent; the statistics are computed from the input.
at::Tensor layer_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    at::IntArrayRef normalized_shape, double eps);

// native_batch_norm's normalized input (before weight and bias).
at::Tensor batch_norm_xhat(
    const at::Tensor& input_p, const at::Tensor& running_mean,
    const at::Tensor& running_var, bool training, double eps);
// Tangent of native_batch_norm's normalized input (before weight and bias)
// from the input's tangent: batch statistics in training, running ones in eval.
at::Tensor batch_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& running_mean, const at::Tensor& running_var,
    bool training, double eps);

// native_group_norm's normalized input (before weight and bias).
at::Tensor group_norm_xhat(
    const at::Tensor& input_p, const at::Tensor& mean, const at::Tensor& rstd,
    int64_t group);
// Tangent of native_group_norm's normalized input (before weight and bias)
// from the input's tangent; `mean`, `rstd` ([N, group]) its saved statistics.
at::Tensor group_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& mean, const at::Tensor& rstd, int64_t group);
// Tangent of a normalization's `xhat * weight + bias` (per channel of an
// `ndim`-dimensional input where `ndim` is given), in native's dtype: the
// weight's and bias's shares added in place where they carry tangents, a
// weight without one multiplied out of place (absent tangents arrive as zeros
// of their primals' dtypes).
at::Tensor norm_affine_tangent(
    const at::Tensor& normalized_t, const at::Tensor& xhat,
    const at::Tensor& weight_p, const at::Tensor& weight_t,
    const at::Tensor& bias_t, std::optional<int64_t> ndim = std::nullopt);
// Tangent of native_group_norm's saved mean ([N, group]).
at::Tensor group_norm_mean_tangent(const at::Tensor& input_t, int64_t group);
// Tangent of native_group_norm's saved rstd ([N, group]).
at::Tensor group_norm_rstd_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& mean, const at::Tensor& rstd, int64_t group);

// d binary_cross_entropy / d self, element-wise (unreduced).
at::Tensor bce_self_derivative(
    const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight);
// d binary_cross_entropy / d target, element-wise (unreduced).
at::Tensor bce_target_derivative(
    const at::Tensor& self, const at::Tensor& weight);
// d binary_cross_entropy_with_logits / d self, element-wise (unreduced).
at::Tensor bce_logits_self_derivative(
    const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
    const at::Tensor& pos_weight);
// d binary_cross_entropy_with_logits / d target, element-wise (unreduced).
at::Tensor bce_logits_target_derivative(
    const at::Tensor& self, const at::Tensor& weight,
    const at::Tensor& pos_weight);

// The factor native_dropout applies to kept elements: 1/(1-p) in training
// (0 when p is 1), 1 when `train` is false (absent `train` means training).
double dropout_scale(double p, std::optional<bool> train);

// Weight norm's g or norms (one value per slice of v along dim) viewed to
// broadcast against v: v.size(dim) at dim, 1 elsewhere (all 1 for dim = -1).
at::Tensor weight_norm_broadcast(const at::Tensor& t, const at::Tensor& v, int64_t dim);

}  // namespace dualgen::formulas
