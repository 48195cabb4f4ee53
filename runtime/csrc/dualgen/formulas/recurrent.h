// C++ twins of dualgen.formulas.recurrent (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// Tangents of mkldnn_rnn_layer's (output, hy, cy) from those of its inputs
// (undefined: zero; the biases' count only when has_biases). `output` is the
// layer's output, whose shifted sequence is every step's previous hidden state.
std::vector<at::Tensor> lstm_layer_tangents(
    const at::Tensor& input_t, const at::Tensor& weight0_t,
    const at::Tensor& weight1_t, const at::Tensor& weight2_t,
    const at::Tensor& weight3_t, const at::Tensor& hx_t, const at::Tensor& cx_t,
    const at::Tensor& input, const at::Tensor& weight0, const at::Tensor& weight1,
    const at::Tensor& weight2, const at::Tensor& weight3, const at::Tensor& hx,
    const at::Tensor& cx, const at::Tensor& output, bool reverse, int64_t mode,
    bool has_biases, at::IntArrayRef batch_sizes);

// Gradients of mkldnn_rnn_layer's inputs (input, weight0 .. weight3, hx, cx)
// from those of (output, hy, cy) (undefined: zero), by backpropagation through
// time. Without has_biases the bias arguments get zero gradients.
std::vector<at::Tensor> lstm_layer_grads(
    const at::Tensor& grad_output, const at::Tensor& grad_hy,
    const at::Tensor& grad_cy, const at::Tensor& input, const at::Tensor& weight0,
    const at::Tensor& weight1, const at::Tensor& weight2,
    const at::Tensor& weight3, const at::Tensor& hx, const at::Tensor& cx,
    const at::Tensor& output, bool reverse, int64_t mode, bool has_biases,
    at::IntArrayRef batch_sizes);

// Tangents of mkldnn_rnn_layer_backward's seven outputs from those of the
// layer's inputs and of the output gradients (undefined: zero).
std::vector<at::Tensor> lstm_layer_backward_tangents(
    const at::Tensor& input_t, const at::Tensor& weight0_t,
    const at::Tensor& weight1_t, const at::Tensor& weight2_t,
    const at::Tensor& weight3_t, const at::Tensor& hx_t, const at::Tensor& cx_t,
    const at::Tensor& grad_output_t, const at::Tensor& grad_hy_t,
    const at::Tensor& grad_cy_t, const at::Tensor& input,
    const at::Tensor& weight0, const at::Tensor& weight1,
    const at::Tensor& weight2, const at::Tensor& weight3, const at::Tensor& hx,
    const at::Tensor& cx, const at::Tensor& output,
    const at::Tensor& grad_output, const at::Tensor& grad_hy,
    const at::Tensor& grad_cy, bool reverse, int64_t mode, bool has_biases,
    at::IntArrayRef batch_sizes);

// Gradients of mkldnn_rnn_layer_backward's differentiable inputs (input,
// weight0 .. weight3, hx, cx, grad_output, grad_hy, grad_cy) from those of its
// seven outputs (undefined: zero).
std::vector<at::Tensor> lstm_layer_backward_grads(
    const at::Tensor& grad_input, const at::Tensor& grad_weight0,
    const at::Tensor& grad_weight1, const at::Tensor& grad_weight2,
    const at::Tensor& grad_weight3, const at::Tensor& grad_hx,
    const at::Tensor& grad_cx, const at::Tensor& input,
    const at::Tensor& weight0, const at::Tensor& weight1,
    const at::Tensor& weight2, const at::Tensor& weight3, const at::Tensor& hx,
    const at::Tensor& cx, const at::Tensor& output,
    const at::Tensor& grad_output, const at::Tensor& grad_hy,
    const at::Tensor& grad_cy, bool reverse, int64_t mode, bool has_biases,
    at::IntArrayRef batch_sizes);

}  // namespace dualgen::formulas
