#include "dualgen/formulas/backward_ops.h"
#include "dualgen/formulas/bindings.h"

namespace dualgen::formulas {

namespace {

namespace py = pybind11;
using OptTensor = std::optional<at::Tensor>;

using binding::undefined_if_none;

// norm_backward_tangent's `extra` as Python passes it: normalized_shape (a
// sequence), None, or the group count (an int: a one-element list in C++).
std::optional<std::vector<int64_t>> norm_extra(const py::object& extra) {
  if (extra.is_none()) {
    return std::nullopt;
  }
  if (py::isinstance<py::int_>(extra)) {
    return std::vector<int64_t>{extra.cast<int64_t>()};
  }
  return extra.cast<std::vector<int64_t>>();
}

using binding::to_scalar;

}  // namespace

void bind_backward_ops(pybind11::module_& m) {
  m.def(
      "elu_second_derivative",
      [](const at::Tensor& self_or_result, const py::object& alpha,
         const py::object& scale, const py::object& input_scale, bool is_result) {
        return elu_second_derivative(
            self_or_result, to_scalar(alpha), to_scalar(scale),
            to_scalar(input_scale), is_result);
      },
      py::arg("self_or_result"),
      py::arg("alpha"), py::arg("scale"), py::arg("input_scale"),
      py::arg("is_result"));
  m.def(
      "gelu_second_derivative",
      [](const at::Tensor& self, const std::string& approximate) {
        return gelu_second_derivative(self, approximate);
      },
      py::arg("self"), py::arg("approximate") = "none");
  m.def("mish_derivative", &mish_derivative, py::arg("self"));
  m.def("mish_second_derivative", &mish_second_derivative, py::arg("self"));
  m.def(
      "glu_double_backward", &glu_double_backward, py::arg("grad"),
      py::arg("grad_output"), py::arg("self"), py::arg("dim"));
  m.def(
      "bce_self_second_derivative",
      [](const at::Tensor& self, const at::Tensor& target, const OptTensor& weight) {
        return bce_self_second_derivative(self, target, undefined_if_none(weight));
      },
      py::arg("self"), py::arg("target"), py::arg("weight"));
  m.def(
      "bce_cross_derivative",
      [](const at::Tensor& self, const OptTensor& weight) {
        return bce_cross_derivative(self, undefined_if_none(weight));
      },
      py::arg("self"), py::arg("weight"));
  m.def(
      "convolution_backward_tangent",
      [](int64_t which, const OptTensor& result, const OptTensor& grad_output_t,
         const OptTensor& other_t, const at::Tensor& grad_output,
         const at::Tensor& input, const at::Tensor& weight,
         std::vector<int64_t> stride, std::vector<int64_t> padding,
         std::vector<int64_t> dilation, bool transposed,
         std::vector<int64_t> output_padding, int64_t groups) {
        return convolution_backward_tangent(
            which, undefined_if_none(result), undefined_if_none(grad_output_t),
            undefined_if_none(other_t), grad_output, input, weight, stride, padding,
            dilation, transposed, output_padding, groups);
      },
      py::arg("which"), py::arg("result"), py::arg("grad_output_t"),
      py::arg("other_t"), py::arg("grad_output"), py::arg("input"),
      py::arg("weight"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("transposed"), py::arg("output_padding"),
      py::arg("groups"));
  m.def(
      "norm_backward_tangent",
      [](int64_t which, const OptTensor& result, const std::string& kind,
         const OptTensor& grad_out_t, const OptTensor& input_t,
         const OptTensor& weight_t, const OptTensor& mean_t,
         const OptTensor& rstd_t, const at::Tensor& grad_out,
         const at::Tensor& input, const OptTensor& weight,
         const OptTensor& mean, const OptTensor& rstd, const py::object& extra,
         bool train, double eps) {
        std::optional<std::vector<int64_t>> dims = norm_extra(extra);
        at::OptionalIntArrayRef extra_ref =
            dims ? at::OptionalIntArrayRef(*dims) : at::OptionalIntArrayRef();
        return norm_backward_tangent(
            which, undefined_if_none(result), kind, undefined_if_none(grad_out_t),
            undefined_if_none(input_t), undefined_if_none(weight_t),
            undefined_if_none(mean_t), undefined_if_none(rstd_t), grad_out, input,
            undefined_if_none(weight), undefined_if_none(mean), undefined_if_none(rstd),
            extra_ref, train, eps);
      },
      py::arg("which"), py::arg("result"), py::arg("kind"),
      py::arg("grad_out_t"), py::arg("input_t"), py::arg("weight_t"),
      py::arg("mean_t"), py::arg("rstd_t"), py::arg("grad_out"),
      py::arg("input"), py::arg("weight"), py::arg("mean"), py::arg("rstd"),
      py::arg("extra"), py::arg("train") = true, py::arg("eps") = 0.0);
}

}  // namespace dualgen::formulas
