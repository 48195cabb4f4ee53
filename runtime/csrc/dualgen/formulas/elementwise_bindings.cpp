#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/elementwise.h"

namespace dualgen::formulas {

namespace {

namespace py = pybind11;
using OptTensor = std::optional<at::Tensor>;

using binding::to_optional_scalar;
using binding::to_scalar;
using binding::undefined_if_none;

std::vector<at::Tensor> undefined_if_none(const std::vector<OptTensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const OptTensor& t : ts) {
    out.push_back(undefined_if_none(t));
  }
  return out;
}

// fill_absent as Python calls it: `tangents` None or a list with Nones; a
// primal list with a None goes to the Tensor?[] overload.
std::vector<at::Tensor> bound_fill_absent(
    const std::optional<std::vector<OptTensor>>& tangents,
    const std::vector<OptTensor>& primals) {
  std::vector<at::Tensor> dense_tangents =
      tangents.has_value() ? undefined_if_none(*tangents) : std::vector<at::Tensor>();
  bool any_none = false;
  for (const OptTensor& p : primals) {
    any_none = any_none || !p.has_value();
  }
  if (!any_none) {
    return fill_absent(dense_tangents, undefined_if_none(primals));
  }
  c10::List<std::optional<at::Tensor>> optional_primals;
  for (const OptTensor& p : primals) {
    optional_primals.push_back(p);
  }
  return fill_absent(dense_tangents, optional_primals);
}

}  // namespace

void bind_elementwise(pybind11::module_& m) {
  m.def("as_real_like", &as_real_like);
  m.def("unbroadcast", &unbroadcast);

  m.def("scale", py::overload_cast<const at::Tensor&, const at::Tensor&>(&scale));
  m.def("scale", [](const OptTensor& t, const py::object& factor) {
    return scale(undefined_if_none(t), to_scalar(factor));
  });
  m.def("copy_broadcast", &copy_broadcast);
  m.def("conform", [](const OptTensor& tangent, const OptTensor& result) {
    return conform(undefined_if_none(tangent), undefined_if_none(result));
  });
  m.def("fill_absent", &bound_fill_absent);
  // The Tensor?[] overload even where no primal is None (for tests).
  m.def(
      "_fill_absent_optional_primals",
      [](const std::optional<std::vector<OptTensor>>& tangents,
         const std::vector<OptTensor>& primals) {
        c10::List<std::optional<at::Tensor>> optional_primals;
        for (const OptTensor& p : primals) {
          optional_primals.push_back(p);
        }
        return fill_absent(
            tangents.has_value() ? undefined_if_none(*tangents)
                                 : std::vector<at::Tensor>(),
            optional_primals);
      });
  m.def("winner_weight", &winner_weight);
  m.def(
      "pow_self_derivative",
      py::overload_cast<const at::Tensor&, const at::Tensor&>(&pow_self_derivative));
  m.def("pow_self_derivative", [](const at::Tensor& self, const py::object& exponent) {
    return pow_self_derivative(self, to_scalar(exponent));
  });
  m.def(
      "pow_exponent_derivative",
      py::overload_cast<const at::Tensor&, const at::Tensor&, const at::Tensor&>(
          &pow_exponent_derivative));
  m.def(
      "pow_exponent_derivative",
      [](const py::object& self, const at::Tensor& exponent, const at::Tensor& result) {
        return pow_exponent_derivative(to_scalar(self), exponent, result);
      });
  m.def(
      "clamp_mask",
      [](const at::Tensor& self, const py::object& min, const py::object& max) {
        return clamp_mask(self, to_optional_scalar(min), to_optional_scalar(max));
      });
  m.def("finite_parts", &finite_parts);
  m.def("mvlgamma_derivative", &mvlgamma_derivative);
  m.def("logit_derivative", &logit_derivative);
  m.def("angle_tangent", &angle_tangent);
  m.def(
      "unless_rounded",
      [](const at::Tensor& t, const std::optional<std::string>& rounding_mode) {
        return unless_rounded(
            t,
            rounding_mode.has_value()
                ? std::optional<c10::string_view>(*rounding_mode)
                : std::nullopt);
      });
  m.def(
      "clamp_tensor_weight",
      [](const at::Tensor& self_p,
         const OptTensor& min_p,
         const OptTensor& max_p,
         const std::string& which) {
        return clamp_tensor_weight(
            self_p, undefined_if_none(min_p), undefined_if_none(max_p), which);
      });
  m.def("sgn_derivative", &sgn_derivative);
}

}  // namespace dualgen::formulas
