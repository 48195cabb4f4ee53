#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/fused_nn.h"

namespace dualgen::formulas {

void bind_fused_nn(pybind11::module_& m) {
  m.def("cdist_weights", &cdist_weights);
  m.def("cdist_weights_diff_derivative", &cdist_weights_diff_derivative);
  m.def("cdist_weights_dist_derivative", &cdist_weights_dist_derivative);
  m.def(
      "ctc_loss_log_probs_grad",
      [](const at::Tensor& grad, const at::Tensor& log_probs,
         const at::Tensor& targets, const at::Tensor& input_lengths,
         const at::Tensor& target_lengths, const at::Tensor& neg_log_likelihood,
         const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
        return ctc_loss_log_probs_grad(
            grad, log_probs, targets, input_lengths, target_lengths,
            neg_log_likelihood, log_alpha, blank, zero_infinity);
      });
  m.def(
      "ctc_loss_log_probs_grad",
      [](const at::Tensor& grad, const at::Tensor& log_probs,
         const at::Tensor& targets, std::vector<int64_t> input_lengths,
         std::vector<int64_t> target_lengths, const at::Tensor& neg_log_likelihood,
         const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
        return ctc_loss_log_probs_grad(
            grad, log_probs, targets, at::IntArrayRef(input_lengths),
            at::IntArrayRef(target_lengths), neg_log_likelihood, log_alpha, blank,
            zero_infinity);
      });
  m.def("grid_sampler_grid_tangent", &grid_sampler_grid_tangent);
  m.def("grid_sampler_grid_tangent_adjoint", &grid_sampler_grid_tangent_adjoint);
  m.def("grid_sampler_grid_second", &grid_sampler_grid_second);
  m.def(
      "grouped_mm_any_layout",
      [](const at::Tensor& a, const at::Tensor& b,
         const std::optional<at::Tensor>& offs) {
        return grouped_mm_any_layout(a, b, binding::undefined_if_none(offs));
      });
}

}  // namespace dualgen::formulas
