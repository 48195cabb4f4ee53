#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/recurrent.h"

namespace dualgen::formulas {

namespace {

using OptTensor = std::optional<at::Tensor>;

using binding::undefined_if_none;

}  // namespace

void bind_recurrent(pybind11::module_& m) {
  m.def(
      "lstm_layer_tangents",
      [](const OptTensor& input_t, const OptTensor& weight0_t,
         const OptTensor& weight1_t, const OptTensor& weight2_t,
         const OptTensor& weight3_t, const OptTensor& hx_t, const OptTensor& cx_t,
         const at::Tensor& input, const at::Tensor& weight0,
         const at::Tensor& weight1, const at::Tensor& weight2,
         const at::Tensor& weight3, const at::Tensor& hx, const at::Tensor& cx,
         const at::Tensor& output, bool reverse, int64_t mode, bool has_biases,
         std::vector<int64_t> batch_sizes) {
        return lstm_layer_tangents(
            undefined_if_none(input_t), undefined_if_none(weight0_t),
            undefined_if_none(weight1_t), undefined_if_none(weight2_t),
            undefined_if_none(weight3_t), undefined_if_none(hx_t),
            undefined_if_none(cx_t), input, weight0, weight1, weight2, weight3,
            hx, cx, output, reverse, mode, has_biases, batch_sizes);
      });
  m.def(
      "lstm_layer_grads",
      [](const OptTensor& grad_output, const OptTensor& grad_hy,
         const OptTensor& grad_cy, const at::Tensor& input,
         const at::Tensor& weight0, const at::Tensor& weight1,
         const at::Tensor& weight2, const at::Tensor& weight3,
         const at::Tensor& hx, const at::Tensor& cx, const at::Tensor& output,
         bool reverse, int64_t mode, bool has_biases,
         std::vector<int64_t> batch_sizes) {
        return lstm_layer_grads(
            undefined_if_none(grad_output), undefined_if_none(grad_hy),
            undefined_if_none(grad_cy), input, weight0, weight1, weight2,
            weight3, hx, cx, output, reverse, mode, has_biases, batch_sizes);
      });
  m.def(
      "lstm_layer_backward_tangents",
      [](const OptTensor& input_t, const OptTensor& weight0_t,
         const OptTensor& weight1_t, const OptTensor& weight2_t,
         const OptTensor& weight3_t, const OptTensor& hx_t, const OptTensor& cx_t,
         const OptTensor& grad_output_t, const OptTensor& grad_hy_t,
         const OptTensor& grad_cy_t, const at::Tensor& input,
         const at::Tensor& weight0, const at::Tensor& weight1,
         const at::Tensor& weight2, const at::Tensor& weight3,
         const at::Tensor& hx, const at::Tensor& cx, const at::Tensor& output,
         const OptTensor& grad_output, const OptTensor& grad_hy,
         const OptTensor& grad_cy, bool reverse, int64_t mode, bool has_biases,
         std::vector<int64_t> batch_sizes) {
        return lstm_layer_backward_tangents(
            undefined_if_none(input_t), undefined_if_none(weight0_t),
            undefined_if_none(weight1_t), undefined_if_none(weight2_t),
            undefined_if_none(weight3_t), undefined_if_none(hx_t),
            undefined_if_none(cx_t), undefined_if_none(grad_output_t),
            undefined_if_none(grad_hy_t), undefined_if_none(grad_cy_t), input,
            weight0, weight1, weight2, weight3, hx, cx, output,
            undefined_if_none(grad_output), undefined_if_none(grad_hy),
            undefined_if_none(grad_cy), reverse, mode, has_biases, batch_sizes);
      });
  m.def(
      "lstm_layer_backward_grads",
      [](const OptTensor& grad_input, const OptTensor& grad_weight0,
         const OptTensor& grad_weight1, const OptTensor& grad_weight2,
         const OptTensor& grad_weight3, const OptTensor& grad_hx,
         const OptTensor& grad_cx, const at::Tensor& input,
         const at::Tensor& weight0, const at::Tensor& weight1,
         const at::Tensor& weight2, const at::Tensor& weight3,
         const at::Tensor& hx, const at::Tensor& cx, const at::Tensor& output,
         const OptTensor& grad_output, const OptTensor& grad_hy,
         const OptTensor& grad_cy, bool reverse, int64_t mode, bool has_biases,
         std::vector<int64_t> batch_sizes) {
        return lstm_layer_backward_grads(
            undefined_if_none(grad_input), undefined_if_none(grad_weight0),
            undefined_if_none(grad_weight1), undefined_if_none(grad_weight2),
            undefined_if_none(grad_weight3), undefined_if_none(grad_hx),
            undefined_if_none(grad_cx), input, weight0, weight1, weight2,
            weight3, hx, cx, output, undefined_if_none(grad_output),
            undefined_if_none(grad_hy), undefined_if_none(grad_cy), reverse,
            mode, has_biases, batch_sizes);
      });
}

}  // namespace dualgen::formulas
