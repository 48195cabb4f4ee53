// C++ twins of dualgen.formulas.backward_ops (same names, same meaning): the
// forward-over-reverse helpers of the `*_backward` ops' formulas.
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// d elu_backward(g, ...) / d self_or_result, divided by g, element-wise: elu's
// second derivative input_scale^2 alpha scale exp(x input_scale) where x <= 0
// (is_result false), or input_scale where the result y <= 0 (is_result true).
at::Tensor elu_second_derivative(
    const at::Tensor& self_or_result,
    const c10::Scalar& alpha,
    const c10::Scalar& scale,
    const c10::Scalar& input_scale,
    bool is_result);

// The second derivative of gelu, element-wise: phi(x) (2 - x^2) for the exact
// form; for approximate == "tanh" (u = k (x + c x^3), T = tanh(u)):
// (1 - T^2) (u' - x T u'^2 + x u''/2).
at::Tensor gelu_second_derivative(
    const at::Tensor& self, c10::string_view approximate = "none");

// The second derivative of mish(x) = x tanh(softplus(x)), element-wise: with
// T = tanh(softplus(x)), s = sigmoid(x): (1 - T^2) (2 s + x s (1 - s) - 2 x s^2 T).
at::Tensor mish_derivative(const at::Tensor& self);
at::Tensor mish_second_derivative(const at::Tensor& self);

// glu's Hessian at self (halves a, b along dim) applied to `grad` and contracted
// with grad_output: [g_b go s', s' go (g_a + g_b a (1 - 2 s))], s = sigmoid(b).
at::Tensor glu_double_backward(
    const at::Tensor& grad,
    const at::Tensor& grad_output,
    const at::Tensor& self,
    int64_t dim);

// d^2 binary_cross_entropy / d self^2, element-wise (unreduced):
// w ((x - y)^2 + y (1 - y)) / (x (1 - x))^2, x (1 - x) clamped from 0; `weight`
// may be undefined (None).
at::Tensor bce_self_second_derivative(
    const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight);

// d^2 binary_cross_entropy / d self d target, element-wise (unreduced):
// -w / (x (1 - x)), the denominator clamped from 0; `weight` may be undefined.
at::Tensor bce_cross_derivative(const at::Tensor& self, const at::Tensor& weight);

// Tangent of output `which` (0 grad_input, 1 grad_weight, 2 grad_bias) of
// convolution_backward; undefined where `result` is (that output was not
// computed). `other_t` is the weight's tangent for output 0, the input's for
// output 1, unused (may be undefined) for output 2.
at::Tensor convolution_backward_tangent(
    int64_t which,
    const at::Tensor& result,
    const at::Tensor& grad_output_t,
    const at::Tensor& other_t,
    const at::Tensor& grad_output,
    const at::Tensor& input,
    const at::Tensor& weight,
    at::IntArrayRef stride,
    at::IntArrayRef padding,
    at::IntArrayRef dilation,
    bool transposed,
    at::IntArrayRef output_padding,
    int64_t groups);

// Tangent of output `which` (grad_input, grad_weight, grad_bias) of a norm's
// backward op; undefined where `result` is. `kind` is "layer" (`extra`:
// normalized_shape), "batch" (`extra`: None; `mean`, `rstd`: save_mean,
// save_invstd in training, running_mean, running_var in eval with `eps`) or
// "group" (`extra`: the group count: an int64_t converts to a one-element
// OptionalIntArrayRef). Tangents may be undefined; with mean_t undefined the
// statistics move with the input (total derivative), else they are inputs of
// their own (partial derivatives).
at::Tensor norm_backward_tangent(
    int64_t which,
    const at::Tensor& result,
    c10::string_view kind,
    const at::Tensor& grad_out_t,
    const at::Tensor& input_t,
    const at::Tensor& weight_t,
    const at::Tensor& mean_t,
    const at::Tensor& rstd_t,
    const at::Tensor& grad_out,
    const at::Tensor& input,
    const at::Tensor& weight,
    const at::Tensor& mean,
    const at::Tensor& rstd,
    at::OptionalIntArrayRef extra,
    bool train = true,
    double eps = 0.0);

}  // namespace dualgen::formulas
