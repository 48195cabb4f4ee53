// dualgen's kernel in front of torch's Python dispatch mode.
//
// A TorchDispatchMode sees an op only after torch has turned its arguments into
// Python objects and called `__torch_dispatch__`: at small sizes that round trip
// costs about what native forward AD's whole dual op does. While the C++ backend
// is on, this kernel is registered, for each op with a generated kernel, at the
// PythonTLSSnapshot key: the first key an op reaches while a mode is active, above
// autograd. When dualgen's mode is the only one and the op's tensors are plain
// strided ones (no subclass, vmap, autocast, functorch or lazy bits), it offers
// the op to the hot path (hot_path.cpp) with Python's keys excluded, so the op
// runs below it as it would (autograd, views, the backend) and never reaches the
// mode. Whatever the hot path declines, and every op when the conditions do not
// hold, continues as torch's own PythonTLSSnapshot fallback does (the snapshot
// guard, then the keys below) and reaches the mode's Python path.
#include <ATen/core/PythonFallbackKernel.h>
#include <c10/core/impl/PyInterpreter.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <atomic>

#include "dualgen/hot_path_bindings.h"
#include "dualgen/hot_path.h"
#include "dualgen/store.h"

namespace dualgen {

namespace {

std::atomic<bool> front_on{false};
std::unique_ptr<torch::Library> library;
// OpOverload objects by schema: what the hot path takes.
std::unordered_map<const c10::FunctionSchema*, py::object>* overloads = nullptr;
py::object* mode_key = nullptr;  // "mode": levels.STATE's attribute

// The keys of an op the hot path may take from here: a mode's, autograd's and a
// strided CPU tensor's. Any other (vmap, functorch, autocast, functionalization,
// conjugate or negative bits, zero tensors, other backends) goes the usual way.
bool plain_keys(c10::DispatchKeySet keys) {
  static const c10::DispatchKeySet allowed({c10::DispatchKey::PythonTLSSnapshot,
                                            c10::DispatchKey::Python,
                                            c10::DispatchKey::ADInplaceOrView,
                                            c10::DispatchKey::AutogradFunctionality,
                                            // an undefined tensor's (an absent
                                            // optional tensor passed on as one:
                                            // conv2d's bias to convolution); other
                                            // backends' tensors that have it are
                                            // refused by their own keys
                                            c10::DispatchKey::AutogradOther,
                                            c10::DispatchKey::Dense,
                                            c10::DispatchKey::BackendSelect,
                                            // legacy vmap's (its random-op checks
                                            // run below, as they would)
                                            c10::DispatchKey::VmapMode});
  static const uint64_t cpu = c10::DispatchKeySet(c10::BackendComponent::CPUBit).raw_repr();
  // (Subtracting keys leaves backend bits: those are compared on their own.)
  const uint64_t functionality = (keys - allowed).raw_repr() & ~c10::full_backend_mask;
  return functionality == 0 && (keys.raw_repr() & c10::full_backend_mask) == cpu;
}

// torch's PythonTLSSnapshot fallback: the dispatch state on entry, kept for the
// mode, then the keys below.
void decline(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
             torch::jit::Stack* stack) {
  at::impl::MaybeSetTLSOnEntryGuard guard;
  op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                                c10::DispatchKey::PythonTLSSnapshot),
                     stack);
}

struct InFront {
  InFront() { in_front = true; }
  ~InFront() { in_front = false; }
};

// The op through the hot path, on its arguments as the dispatcher has them;
// false (nothing run, the stack as it was) where the hot path declines.
bool offer(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  auto found = overloads->find(&schema);
  if (found == overloads->end()) return false;
  const auto& mode = c10::impl::TorchDispatchModeTLS::get_stack_at(0);
  PyObject* ours = PyObject_GetAttr(shared->state.ptr(), mode_key->ptr());
  if (ours == nullptr) throw python_error();
  Py_DECREF(ours);  // the state holds it
  if (mode->ptr(c10::impl::getGlobalPyInterpreter()) != ours) return false;
  const size_t n = schema.arguments().size();
  // A subclass with a dispatch of its own: the mode defers to it
  // (mode._deferring), never the hot path.
  const auto dispatches_itself = [](const at::Tensor& t) {
    return t.key_set().has(c10::DispatchKey::Python);
  };
  if (any_tensor(torch::jit::last(*stack, n), dispatches_itself)) return false;
  // The arguments on a stack of their own: the hot path leaves them as they
  // were where it declines, and the outputs in their place where it runs.
  torch::jit::Stack own(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  {
    c10::impl::ExcludeDispatchKeyGuard no_python(python_keys);
    InFront front;
    if (!dispatch_stack(found->second, own)) return false;
  }
  torch::jit::drop(*stack, n);
  for (c10::IValue& output : own) stack->push_back(std::move(output));
  return true;
}

void front_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
  if (front_on.load(std::memory_order_relaxed) && plain_keys(keys) &&
      c10::impl::TorchDispatchModeTLS::stack_len() == 1) {
    bool handled = false;
    {
      py::gil_scoped_acquire gil;
      try {
        handled = offer(op, stack);
      } catch (py::error_already_set& e) {
        e.restore();
        throw python_error();
      }
    }
    if (handled) return;
  }
  decline(op, keys, stack);
}

// Register the front kernel for `ops` (OpOverloads), or, given None, remove it.
void set_front(const py::object& ops) {
  if (overloads == nullptr) {
    overloads = new std::unordered_map<const c10::FunctionSchema*, py::object>();
    mode_key = new py::object(py::str("mode"));
  }
  front_on.store(false);
  library.reset();
  overloads->clear();
  if (ops.is_none()) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::PythonTLSSnapshot,
                                             __FILE__, __LINE__);
  for (const py::handle& func : ops) {
    const auto name = func.attr("_schema").attr("name").cast<std::string>();
    auto overload = func.attr("_overloadname").cast<std::string>();
    const auto handle = c10::Dispatcher::singleton().findSchema(
        {name, overload == "default" ? "" : overload});
    if (!handle) continue;
    const std::string bare = name.substr(name.find("::") + 2);
    const std::string qualified = overload == "default" ? bare : bare + "." + overload;
    library->impl(qualified.c_str(),
                  torch::CppFunction::makeFromBoxedFunction<&front_kernel>());
    overloads->emplace(&handle->schema(), py::reinterpret_borrow<py::object>(func));
  }
  front_on.store(true);
}

}  // namespace

void bind_front(py::module_& m) {
  m.def("set_front", &set_front,
        "register the front kernel for these OpOverloads (None: remove it)");
}

}  // namespace dualgen
