// The extension module `dualgen_cpp`: the generated C++ kernels, callable from
// Python with the Python kernels' arguments, and the formulas' C++ twins (bound
// for the tests that hold each to its Python helper).
#include <torch/csrc/jit/python/pybind_utils.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "dualgen/formulas/bindings.h"
#include "dualgen/hot_path_bindings.h"
#include "dualgen/kernel.h"
#include "dualgen/saved.h"
#include "dualgen/values.h"

namespace py = pybind11;

namespace dualgen {

Registry& registry() {
  static Registry* kernels = [] {
    auto* r = new Registry();
    jvp::register_generated(*r);
    return r;
  }();
  return *kernels;
}

namespace {

const c10::FunctionSchema& schema_of(const std::string& key) {
  // key: "aten::add.Tensor"; "default" is the unnamed overload
  static std::unordered_map<std::string, c10::OperatorHandle> handles;
  auto it = handles.find(key);
  if (it == handles.end()) {
    const auto dot = key.rfind('.');
    std::string overload = key.substr(dot + 1);
    if (overload == "default") overload = "";
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        key.substr(0, dot).c_str(), overload.c_str());
    it = handles.emplace(key, handle).first;
  }
  return it->second.schema();
}

c10::IValue tangent_ivalue(const py::handle& obj) {
  if (obj.is_none()) return c10::IValue();
  if (THPVariable_Check(obj.ptr())) return c10::IValue(THPVariable_Unpack(obj.ptr()));
  // A number's zero tangent (dtypes.py's meta run of a formula) is a number.
  if (auto number = wrapped_number(obj)) return c10::IValue(*number);
  c10::List<std::optional<at::Tensor>> list;
  for (const py::handle& item : obj) {
    list.push_back(item.is_none() ? std::nullopt
                                  : std::optional<at::Tensor>(
                                        THPVariable_Unpack(item.ptr())));
  }
  return c10::IValue(list);
}

// A generated kernel called as the Python kernel is: primals in schema order,
// tangents of the differentiable inputs, outputs. Returns the list of output
// tangents (None where absent).
py::list call_jvp(const std::string& key, const py::sequence& args,
                  const py::sequence& tangents, const py::sequence& outputs) {
  JvpKernel kernel = registry().find(key);
  TORCH_CHECK(kernel != nullptr, "dualgen has no C++ kernel for ", key);
  const c10::FunctionSchema& schema = schema_of(key);
  Values arg_values, tangent_values, output_values;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    arg_values.push_back(typed_ivalue(args[i], arguments[i].type()));
  }
  for (const py::handle& t : tangents) tangent_values.push_back(tangent_ivalue(t));
  const auto& returns = schema.returns();
  for (size_t i = 0; i < returns.size(); ++i) {
    output_values.push_back(typed_ivalue(outputs[i], returns[i].type()));
  }
  const Results results = kernel(arg_values, tangent_values, output_values);
  py::list out;
  for (const c10::IValue& r : results) out.append(torch::jit::toPyObject(r));
  return out;
}

// For the tests of temporaries.h: `a op b` (op one of + - * /, or "neg" of `a`)
// with a copy of `a` (`temporary` "left"), of `b` ("right") or of both as the
// temporaries; returns the result and whether it was written into a copy.
py::tuple temporary_operator(const std::string& op, const at::Tensor& a,
                             const py::object& b, const std::string& temporary) {
  const auto copy = [](const at::Tensor& t) {  // keeping a lazy conjugation
    if (t.is_conj()) return t.conj().clone(at::MemoryFormat::Preserve).conj();
    return t.clone(at::MemoryFormat::Preserve);
  };
  const bool left = temporary != "right", right = temporary != "left";
  const auto data_of = [](const at::Tensor& t) -> const void* {
    return t.has_storage() ? t.data_ptr() : nullptr;  // (none: a batched tensor)
  };
  at::Tensor temp_a = copy(a);
  const void* written[2] = {data_of(temp_a), nullptr};
  at::Tensor result;
  if (op == "neg") {
    result = -std::move(temp_a);
  } else if (THPVariable_Check(b.ptr())) {
    const at::Tensor& other = THPVariable_Unpack(b.ptr());
    at::Tensor temp_b = copy(other);
    written[1] = data_of(temp_b);
#define DUALGEN_APPLY(symbol)                                                   \
  if (left && right) result = std::move(temp_a) symbol std::move(temp_b);      \
  else if (left) result = std::move(temp_a) symbol other;                     \
  else result = a symbol std::move(temp_b);
    if (op == "+") { DUALGEN_APPLY(+) }
    else if (op == "-") { DUALGEN_APPLY(-) }
    else if (op == "*") { DUALGEN_APPLY(*) }
    else if (op == "/") { DUALGEN_APPLY(/) }
    else TORCH_CHECK(false, "no operator ", op);
#undef DUALGEN_APPLY
  } else {
    const c10::Scalar number = torch::jit::toIValue(b, c10::NumberType::get()).toScalar();
    if (!left) {  // a number on the left, the copy of `a` on the right
      if (op == "+") result = number + std::move(temp_a);
      else if (op == "-") result = rsub(std::move(temp_a), number);  // as printed
      else if (op == "*") result = number * std::move(temp_a);
      else TORCH_CHECK(false, "no operator ", op, " with a number on the left");
    } else if (op == "+") result = std::move(temp_a) + number;
    else if (op == "-") result = std::move(temp_a) - number;
    else if (op == "*") result = std::move(temp_a) * number;
    else if (op == "/") result = std::move(temp_a) / number;
    else TORCH_CHECK(false, "no operator ", op);
  }
  const void* data = data_of(result);
  const bool into_copy = data != nullptr && (data == written[0] || data == written[1]);
  return py::make_tuple(result, into_copy);
}

}  // namespace
}  // namespace dualgen

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "dualgen's C++ kernels (generated from derivatives.yaml)";
  m.def("call_jvp", &dualgen::call_jvp);
  m.def("kernel_names", [] { return dualgen::registry().names(); });
  m.def("has_kernel",
        [](const std::string& key) { return dualgen::registry().find(key) != nullptr; });
  m.def("temporary_operator", &dualgen::temporary_operator);
  m.def("set_temporaries_reuse", &dualgen::temporaries::set_reuse);
  m.def("temporaries_reuse", &dualgen::temporaries::reuse);
  dualgen::bind_hot_path(m);
  dualgen::bind_front(m);
  dualgen::bind_batching(m);
  dualgen::bind_saved_outputs(m);
  auto formulas = m.def_submodule("formulas", "the C++ twins of dualgen.formulas");
  dualgen::formulas::bind_formulas(formulas);
}
