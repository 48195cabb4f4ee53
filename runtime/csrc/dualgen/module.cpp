// The extension module `dualgen_cpp`: the generated C++ kernels, callable from
// Python with the Python kernels' arguments, and the formulas' C++ twins (bound
// for the tests that hold each to its Python helper).
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include "dualgen/formulas/bindings.h"
#include "dualgen/fast_path.h"
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

}  // namespace
}  // namespace dualgen

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "dualgen's C++ kernels (generated from derivatives.yaml)";
  m.def("call_jvp", &dualgen::call_jvp);
  m.def("kernel_names", [] { return dualgen::registry().names(); });
  m.def("has_kernel",
        [](const std::string& key) { return dualgen::registry().find(key) != nullptr; });
  dualgen::bind_fast_path(m);
  dualgen::bind_front(m);
  dualgen::bind_batching(m);
  dualgen::bind_saved_outputs(m);
  auto formulas = m.def_submodule("formulas", "the C++ twins of dualgen.formulas");
  dualgen::formulas::bind_elementwise(formulas);
  dualgen::formulas::bind_reductions(formulas);
  dualgen::formulas::bind_nn(formulas);
  dualgen::formulas::bind_shapes(formulas);
  dualgen::formulas::bind_linalg_decompositions(formulas);
  dualgen::formulas::bind_linalg_solves(formulas);
  dualgen::formulas::bind_backward_ops(formulas);
  dualgen::formulas::bind_attention(formulas);
  dualgen::formulas::bind_transformer(formulas);
  dualgen::formulas::bind_recurrent(formulas);
  dualgen::formulas::bind_fused_nn(formulas);
  dualgen::formulas::bind_quantization(formulas);
}
