#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/nn.h"

namespace dualgen::formulas {

namespace {

using OptTensor = std::optional<at::Tensor>;

using binding::undefined_if_none;

}  // namespace

void bind_nn(pybind11::module_& m) {
  m.def("apply_loss_reduction", &apply_loss_reduction);
  m.def("expand_loss_grad", &expand_loss_grad);
  m.def("channel_view", &channel_view);
  m.def("_group_shape", &group_shape);
  m.def(
      "layer_norm_xhat",
      [](const at::Tensor& input_p, std::vector<int64_t> normalized_shape,
         double eps) { return layer_norm_xhat(input_p, normalized_shape, eps); });
  m.def(
      "layer_norm_tangent",
      [](const at::Tensor& input_t, const at::Tensor& input_p,
         std::vector<int64_t> normalized_shape, double eps) {
        return layer_norm_tangent(input_t, input_p, normalized_shape, eps);
      });
  m.def(
      "batch_norm_xhat",
      [](const at::Tensor& input_p, const OptTensor& running_mean,
         const OptTensor& running_var, bool training, double eps) {
        return batch_norm_xhat(
            input_p, undefined_if_none(running_mean),
            undefined_if_none(running_var), training, eps);
      });
  m.def(
      "batch_norm_tangent",
      [](const at::Tensor& input_t, const at::Tensor& input_p,
         const OptTensor& running_mean, const OptTensor& running_var,
         bool training, double eps) {
        return batch_norm_tangent(
            input_t, input_p, undefined_if_none(running_mean),
            undefined_if_none(running_var), training, eps);
      });
  m.def("group_norm_xhat", &group_norm_xhat);
  m.def(
      "group_norm_tangent", &group_norm_tangent);
  m.def(
      "norm_affine_tangent",
      [](const at::Tensor& normalized_t, const at::Tensor& xhat,
         const OptTensor& weight_p, const OptTensor& weight_t,
         const OptTensor& bias_t, std::optional<int64_t> ndim) {
        return norm_affine_tangent(
            normalized_t, xhat, undefined_if_none(weight_p),
            undefined_if_none(weight_t), undefined_if_none(bias_t), ndim);
      });
  m.def("group_norm_mean_tangent", &group_norm_mean_tangent);
  m.def("group_norm_rstd_tangent", &group_norm_rstd_tangent);
  m.def(
      "bce_self_derivative",
      [](const at::Tensor& self, const at::Tensor& target,
         const OptTensor& weight) {
        return bce_self_derivative(self, target, undefined_if_none(weight));
      });
  m.def(
      "bce_target_derivative",
      [](const at::Tensor& self, const OptTensor& weight) {
        return bce_target_derivative(self, undefined_if_none(weight));
      });
  m.def(
      "bce_logits_self_derivative",
      [](const at::Tensor& self, const at::Tensor& target,
         const OptTensor& weight, const OptTensor& pos_weight) {
        return bce_logits_self_derivative(self, target, undefined_if_none(weight), undefined_if_none(pos_weight));
      });
  m.def(
      "bce_logits_target_derivative",
      [](const at::Tensor& self, const OptTensor& weight,
         const OptTensor& pos_weight) {
        return bce_logits_target_derivative(self, undefined_if_none(weight), undefined_if_none(pos_weight));
      });
  m.def("dropout_scale", &dropout_scale);
  m.def("weight_norm_broadcast", &weight_norm_broadcast);
}

}  // namespace dualgen::formulas
