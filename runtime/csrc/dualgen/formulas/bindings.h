// Each formulas module binds its twins into the extension's `formulas`
// submodule (for the tests that hold each twin to its Python helper).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>

namespace dualgen::formulas {

// Python values as the twins take them, for the bindings.
namespace binding {

// A Python number as a c10::Scalar (torch's pybind caster does not load them).
inline c10::Scalar to_scalar(const pybind11::handle& obj) {
  if (PyBool_Check(obj.ptr())) return c10::Scalar(obj.cast<bool>());
  if (PyLong_Check(obj.ptr())) return c10::Scalar(obj.cast<int64_t>());
  if (PyComplex_Check(obj.ptr())) {
    return c10::Scalar(c10::complex<double>(PyComplex_RealAsDouble(obj.ptr()),
                                            PyComplex_ImagAsDouble(obj.ptr())));
  }
  if (PyFloat_Check(obj.ptr())) return c10::Scalar(obj.cast<double>());
  throw pybind11::type_error("expected a Python number (bool, int, float or complex)");
}

inline std::optional<c10::Scalar> to_optional_scalar(const pybind11::handle& obj) {
  return obj.is_none() ? std::nullopt : std::optional<c10::Scalar>(to_scalar(obj));
}

// Python's None for a tensor as the twins take it: an undefined tensor.
inline at::Tensor undefined_if_none(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

}  // namespace binding

void bind_elementwise(pybind11::module_& m);
void bind_reductions(pybind11::module_& m);
void bind_nn(pybind11::module_& m);
void bind_shapes(pybind11::module_& m);
void bind_linalg_decompositions(pybind11::module_& m);
void bind_linalg_solves(pybind11::module_& m);
void bind_backward_ops(pybind11::module_& m);
void bind_attention(pybind11::module_& m);
void bind_transformer(pybind11::module_& m);
void bind_recurrent(pybind11::module_& m);
void bind_fused_nn(pybind11::module_& m);
void bind_quantization(pybind11::module_& m);

}  // namespace dualgen::formulas
