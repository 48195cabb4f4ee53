// How the generated bindings of the C++ twins (generated/cpp/formulas_bindings.cpp)
// turn the Python values pybind11 loads into the twins' parameters.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/List.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <vector>

namespace dualgen::formulas {

void bind_formulas(pybind11::module_& m);

namespace binding {

// Python's None for a tensor: an undefined tensor.
inline at::Tensor tensor(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

// A list of tensors with Nones (undefined); None for the list: an empty list.
inline std::vector<at::Tensor> tensors(
    const std::optional<std::vector<std::optional<at::Tensor>>>& ts) {
  std::vector<at::Tensor> out;
  if (ts.has_value()) {
    for (const auto& t : *ts) {
      out.push_back(tensor(t));
    }
  }
  return out;
}

inline c10::List<std::optional<at::Tensor>> optional_tensors(
    const std::vector<std::optional<at::Tensor>>& ts) {
  c10::List<std::optional<at::Tensor>> out;
  for (const auto& t : ts) {
    out.push_back(t);
  }
  return out;
}

// Python's `dim` of a reduction: None, one int, or a list of ints; holds the
// list while the twin's call (the full expression) runs.
struct IntList {
  std::optional<std::vector<int64_t>> values;
  operator at::OptionalIntArrayRef() const {
    return values ? at::OptionalIntArrayRef(*values) : at::OptionalIntArrayRef();
  }
};

inline IntList int_list(const pybind11::handle& obj) {
  if (obj.is_none()) return IntList{};
  if (PyLong_Check(obj.ptr())) return IntList{std::vector<int64_t>{obj.cast<int64_t>()}};
  return IntList{obj.cast<std::vector<int64_t>>()};
}

// A Python number as a c10::Scalar (torch's pybind caster does not load them).
inline c10::Scalar scalar(const pybind11::handle& obj) {
  if (PyBool_Check(obj.ptr())) return c10::Scalar(obj.cast<bool>());
  if (PyLong_Check(obj.ptr())) return c10::Scalar(obj.cast<int64_t>());
  if (PyComplex_Check(obj.ptr())) {
    return c10::Scalar(c10::complex<double>(PyComplex_RealAsDouble(obj.ptr()),
                                            PyComplex_ImagAsDouble(obj.ptr())));
  }
  if (PyFloat_Check(obj.ptr())) return c10::Scalar(obj.cast<double>());
  throw pybind11::type_error("expected a Python number (bool, int, float or complex)");
}

inline std::optional<c10::Scalar> optional_scalar(const pybind11::handle& obj) {
  return obj.is_none() ? std::nullopt : std::optional<c10::Scalar>(scalar(obj));
}

inline std::optional<c10::string_view> string(const std::optional<std::string>& s) {
  return s.has_value() ? std::optional<c10::string_view>(*s) : std::nullopt;
}

}  // namespace binding
}  // namespace dualgen::formulas
