// C++ twins of dualgen.formulas.fused_nn (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// d dist / d diff for dist = ||diff||_p over the last dimension (diff
// [..., P, R, M], dist [..., P, R]); zero where dist is 0.
at::Tensor cdist_weights(const at::Tensor& diff, double p, const at::Tensor& dist);
// The derivative of cdist_weights in diff (dist fixed), element-wise.
at::Tensor cdist_weights_diff_derivative(
    const at::Tensor& diff, double p, const at::Tensor& dist);
// The derivative of cdist_weights in dist (diff fixed), shaped like diff.
at::Tensor cdist_weights_dist_derivative(
    const at::Tensor& diff, double p, const at::Tensor& dist);

// The true gradient of _ctc_loss's negative log likelihood in log_probs
// (native's backward minus exp(log_probs) where t < input_length).
at::Tensor ctc_loss_log_probs_grad(
    const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
    at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha,
    int64_t blank, bool zero_infinity);
at::Tensor ctc_loss_log_probs_grad(
    const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha,
    int64_t blank, bool zero_infinity);

// The tangent of grid_sampler_2d / _3d's output from the grid's tangent.
at::Tensor grid_sampler_grid_tangent(
    const at::Tensor& input, const at::Tensor& grid, const at::Tensor& grid_t,
    int64_t interpolation_mode, int64_t padding_mode, bool align_corners);
// The adjoint of grid_sampler_grid_tangent in the input (like input).
at::Tensor grid_sampler_grid_tangent_adjoint(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& grid,
    const at::Tensor& grid_t, int64_t interpolation_mode, int64_t padding_mode,
    bool align_corners);
// The second-derivative term of grid_sampler's grid gradient along grid_t
// (like grid).
at::Tensor grid_sampler_grid_second(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& grid,
    const at::Tensor& grid_t, int64_t interpolation_mode, int64_t padding_mode,
    bool align_corners);

}  // namespace dualgen::formulas

// ---------------------------------------------------------------- grouped matmul

namespace dualgen::formulas {

// aten::_grouped_mm(a, b, offs) on operands in any layout (those whose strides
// the op refuses are copied with rows padded to 16 bytes), zero in the rows
// (columns) of a grouped output past offs[-1]; offs undefined: no offsets.
at::Tensor grouped_mm_any_layout(
    const at::Tensor& a, const at::Tensor& b, const at::Tensor& offs);

}  // namespace dualgen::formulas
