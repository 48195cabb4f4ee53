// Python values as the IValues a kernel or the dispatcher takes.
#pragma once

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

namespace dualgen {

namespace py = pybind11;

// A Python number where the schema has a tensor (ops called with numbers
// below the Python argument parser): the wrapped-number tensor native makes of
// it, which promotes as the number does.
inline std::optional<at::Tensor> wrapped_number(const py::handle& obj) {
  at::Tensor t;
  if (PyBool_Check(obj.ptr())) {
    t = at::scalar_tensor(obj.cast<bool>(), at::kBool);
  } else if (PyLong_Check(obj.ptr())) {
    t = at::scalar_tensor(obj.cast<int64_t>(), at::kLong);
  } else if (PyFloat_Check(obj.ptr())) {
    t = at::scalar_tensor(obj.cast<double>(), at::kDouble);
  } else if (PyComplex_Check(obj.ptr())) {
    t = at::scalar_tensor(c10::Scalar(obj.cast<c10::complex<double>>()), at::kComplexDouble);
  } else {
    return std::nullopt;
  }
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

inline c10::IValue typed_ivalue(const py::handle& obj, const c10::TypePtr& type) {
  if (obj.is_none()) return c10::IValue();
  const auto kind = type->kind();
  const bool tensor = kind == c10::TypeKind::TensorType ||
                      (kind == c10::TypeKind::OptionalType &&
                       type->containedType(0)->kind() == c10::TypeKind::TensorType);
  if (tensor && !THPVariable_Check(obj.ptr())) {
    if (auto number = wrapped_number(obj)) return c10::IValue(*number);
  }
  return torch::jit::toIValue(obj, type);
}

// An op's arguments, given as Python passes them to __torch_dispatch__, bound
// to its schema: positional, then keyword, then the schema's defaults.
inline torch::jit::Stack bind_stack(const c10::FunctionSchema& schema,
                                    const py::tuple& args, const py::handle& kwargs) {
  torch::jit::Stack stack;
  const auto& arguments = schema.arguments();
  stack.reserve(arguments.size());
  const size_t given = args.size();
  const bool has_kwargs = kwargs && !kwargs.is_none() && py::len(kwargs) > 0;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto& argument = arguments[i];
    if (i < given && !argument.kwarg_only()) {
      stack.push_back(typed_ivalue(args[i], argument.type()));
      continue;
    }
    if (has_kwargs) {
      PyObject* value = PyDict_GetItemString(kwargs.ptr(), argument.name().c_str());
      if (value != nullptr) {
        stack.push_back(typed_ivalue(value, argument.type()));
        continue;
      }
    }
    TORCH_CHECK(argument.default_value().has_value(), schema.name(),
                "() is missing argument '", argument.name(), "'");
    stack.push_back(*argument.default_value());
  }
  return stack;
}

}  // namespace dualgen
