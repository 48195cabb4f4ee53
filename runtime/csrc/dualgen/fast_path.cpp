// The per-op hot path: the dispatch mode's work for the common op, in C++.
//
// DualMode.__torch_dispatch__ calls `dispatch` first. It handles an op when the
// Python path would do nothing more than this: plain tensors (no subclass, no
// conjugate or negative views, no vmap), fw grad enabled, the innermost level
// with a tangent being level 0, a generated functional kernel (no user rule),
// no autograd recording (nothing requires grad), tangents in their primals'
// dtypes, and every input tangent a tensor's own (not derived from a view's
// base, not a saved output's). Then it binds the arguments, reads the tangents,
// runs the op once, runs the C++ kernel, lays each tangent out as native does
// and attaches it where the Python code reads tangents (the tensor's
// `__dict__`, keyed by the Level object, and the Level's list of tensors): one
// store, read by both. Anything else returns `SLOW` before the op runs, and the
// Python path handles it; the choice is made before any side effect.
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include "dualgen/fast_path.h"
#include "dualgen/kernel.h"
#include "dualgen/layout.h"
#include "dualgen/values.h"

namespace py = pybind11;

namespace dualgen {

Registry& registry();

namespace {

struct OpEntry {
  bool fast = false;  // a generated functional kernel the hot path may run
  JvpKernel kernel = nullptr;
  std::optional<c10::OperatorHandle> handle;
  std::vector<size_t> inputs;        // schema positions of differentiable inputs
  std::vector<bool> list_inputs;     // ... which are Tensor[]
  std::vector<bool> differentiable;  // per output
  py::object raw;                    // func._op: the op without OpOverload's frame
  std::string note;                  // added to an error the kernel raises
  bool view = false;                 // a view op: its tangent is the same view
  bool uses_outputs = false;         // its formula reads the op's outputs
  bool is_view_op = false;           // the op returns views (func.is_view)
  bool detach = false;               // aten.detach: the mode notes no view of it
};

// What the Python side hands over once (`bind_state`).
struct Shared {
  py::object state;        // levels.STATE (thread-local)
  py::object tangents;     // the __dict__ key of a tensor's tangents
  py::object no_tangent;   // the marker of an explicit "no tangent"
  py::object forward_base; // the __dict__ key of a view's forward base
  py::object slow;         // returned when the Python path must handle the op
  py::object describe;     // op -> None or (cpp key, inputs, list inputs, outputs)
  py::object tensor_type;  // torch.Tensor
  py::object detach;       // torch.ops.aten.detach.default
  py::object no_torch_function;  // torch._C._disabled_torch_function_impl
  py::object sweep_tensors;      // levels.sweep_tensors
};
Shared* shared = nullptr;

// Attribute names, made once: the hot path reads several per op.
struct Names {
  py::str cap{"cap"}, defer_next{"defer_next"}, subclass_op{"subclass_op"},
      levels{"levels"}, user_exclude{"user_exclude"}, raw_repr{"raw_repr"},
      tensors{"tensors"}, sweep_tensors_at{"sweep_tensors_at"}, saved{"saved"},
      remember_output{"remember_output"}, untyped_storage{"untyped_storage"};
};
Names* names = nullptr;

// levels.STATE.user_exclude as a key set; it changes only when a level is
// entered, so its value is kept with the object it came from.
c10::DispatchKeySet user_exclude_keys(const py::object& state) {
  static PyObject* known = nullptr;
  static uint64_t raw = 0;
  py::object keys = state.attr(names->user_exclude);
  if (keys.ptr() != known) {
    raw = keys.attr(names->raw_repr)().cast<uint64_t>();
    Py_XDECREF(known);
    known = keys.inc_ref().ptr();
  }
  return c10::DispatchKeySet(c10::DispatchKeySet::RAW, raw);
}
std::unordered_map<PyObject*, OpEntry>* ops = nullptr;

py::str key(const char* s) { return py::str(s); }

const OpEntry& entry_of(const py::handle& func) {
  auto it = ops->find(func.ptr());
  if (it != ops->end()) return it->second;
  OpEntry entry;
  py::object described = shared->describe(func);
  if (!described.is_none()) {
    auto t = described.cast<py::tuple>();
    entry.kernel = registry().find(t[0].cast<std::string>());
    const auto name = func.attr("_schema").attr("name").cast<std::string>();
    auto overload = func.attr("_overloadname").cast<std::string>();
    if (overload == "default") overload = "";
    entry.handle = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    entry.inputs = t[1].cast<std::vector<size_t>>();
    entry.list_inputs = t[2].cast<std::vector<bool>>();
    entry.differentiable = t[3].cast<std::vector<bool>>();
    entry.note = t[4].cast<std::string>();
    entry.view = t[5].cast<bool>();
    entry.uses_outputs = t[6].cast<bool>();
    entry.fast = entry.kernel != nullptr;
  }
  entry.raw = func.attr("_op");
  entry.is_view_op = func.attr("is_view").cast<bool>();
  entry.detach = func.is(shared->detach);
  func.inc_ref();  // entries are keyed by the op object: keep it alive
  return ops->emplace(func.ptr(), std::move(entry)).first->second;
}

// The tensor's own tangent entries (a dict keyed by Level), or null.
PyObject* entries_of(PyObject* tensor) {
  PyObject** dict = _PyObject_GetDictPtr(tensor);
  if (dict == nullptr || *dict == nullptr) return nullptr;
  return PyDict_GetItemWithError(*dict, shared->tangents.ptr());
}

// Where and how t's elements lie, as tangents.geometry gives it.
py::tuple geometry(const at::Tensor& t) {
  py::tuple sizes(t.dim()), strides(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    sizes[i] = py::int_(t.size(i));
    strides[i] = py::int_(t.stride(i));
  }
  auto* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(t.scalar_type()));
  return py::make_tuple(py::int_(reinterpret_cast<std::intptr_t>(t.data_ptr())), sizes,
                        strides, py::reinterpret_borrow<py::object>(dtype));
}

// Whether t has the geometry of an output the level remembered
// (tangents.remember_saved_outputs): autograd's rebuilt saved outputs do.
bool is_saved_output(const at::Tensor& t, const py::handle& level) {
  py::dict saved = level.attr(names->saved);
  if (saved.empty()) return false;
  return saved.contains(geometry(t));
}

// tangents.remember_saved_outputs for one output: one with a tangent entry at
// `level` is remembered by Level.remember_output (under its geometry, while its
// memory lives, not holding it).
void remember_output(const py::handle& out, const py::handle& level) {
  PyObject** dict = _PyObject_GetDictPtr(out.ptr());
  if (dict == nullptr || *dict == nullptr) return;
  PyObject* entries = PyDict_GetItemWithError(*dict, shared->tangents.ptr());
  if (entries == nullptr || PyDict_GetItemWithError(entries, level.ptr()) == nullptr) return;
  const at::Tensor& t = THPVariable_Unpack(out.ptr());
  if (t._is_zerotensor()) return;
  level.attr(names->remember_output)(geometry(t), out.attr(names->untyped_storage)(),
                                     py::reinterpret_borrow<py::object>(entries));
}

enum class Found { None, Tangent, Slow };

// t's tangent at `level`, as tangents.tangent_of finds it: its own entry; else,
// for a view, none if its forward base has none (a base with one: the Python
// path derives the view's); else, for a rebuilt saved output, the Python path's.
Found tangent_at(PyObject* obj, const at::Tensor& t, const py::handle& level,
                 PyObject** out, int depth = 0) {
  PyObject** dict = _PyObject_GetDictPtr(obj);
  PyObject* own = (dict && *dict) ? *dict : nullptr;
  PyObject* entries = own ? PyDict_GetItemWithError(own, shared->tangents.ptr()) : nullptr;
  PyObject* value = entries ? PyDict_GetItemWithError(entries, level.ptr()) : nullptr;
  if (value == shared->no_tangent.ptr()) return Found::None;
  if (value != nullptr) {
    *out = value;
    return Found::Tangent;
  }
  PyObject* base = own ? PyDict_GetItemWithError(own, shared->forward_base.ptr()) : nullptr;
  py::object base_holder;
  if (base == nullptr && t.is_view()) {
    base_holder = py::reinterpret_steal<py::object>(THPVariable_Wrap(t._base()));
    base = base_holder.ptr();
  }
  if (base != nullptr) {
    if (depth > 8 || !THPVariable_Check(base)) return Found::Slow;
    PyObject* ignored = nullptr;
    const Found found = tangent_at(base, THPVariable_Unpack(base), level, &ignored, depth + 1);
    return found == Found::None ? Found::None : Found::Slow;
  }
  if (t.requires_grad() && !t._is_zerotensor() && is_saved_output(t, level)) {
    return Found::Slow;
  }
  return Found::None;
}

bool plain(const at::Tensor& t) {
  return !t.is_complex() && !t.is_neg() && t.has_storage() &&
         t.layout() == at::kStrided;
}

// Calls `fn` on `value` if it is a tensor, or on each tensor of a list or tuple.
template <typename Fn>
void each_tensor(const py::handle& value, Fn&& fn) {
  if (THPVariable_Check(value.ptr())) {
    fn(value);
  } else if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    for (const py::handle& item : value) {
      if (THPVariable_Check(item.ptr())) fn(item);
    }
  }
}

// Every tensor among the arguments (in lists too), as Python objects.
void collect(const py::handle& value, std::vector<PyObject*>& tensors) {
  each_tensor(value, [&](const py::handle& t) { tensors.push_back(t.ptr()); });
}

// -- attaching tangents (outputs.py, levels.py; laying out: layout.h) ---------

void set_tangent(const py::object& tensor, const py::handle& level, PyObject* value) {
  py::dict dict = py::reinterpret_steal<py::dict>(PyObject_GenericGetDict(tensor.ptr(), nullptr));
  PyObject* entries = PyDict_GetItemWithError(dict.ptr(), shared->tangents.ptr());
  py::dict own;
  if (entries == nullptr) {
    dict[shared->tangents] = own;
  } else {
    own = py::reinterpret_borrow<py::dict>(entries);
  }
  if (!own.contains(level)) {
    py::list tensors = level.attr(names->tensors);
    tensors.append(py::reinterpret_steal<py::object>(PyWeakref_NewRef(tensor.ptr(), nullptr)));
    if (static_cast<int64_t>(tensors.size()) > level.attr(names->sweep_tensors_at).cast<int64_t>()) {
      shared->sweep_tensors(level);  // levels.set_tangent's sweep
    }
  }
  own[level] = py::reinterpret_borrow<py::object>(value);
}

// levels.note_view: a view of a tensor with tangents of its own follows that
// tensor's tangent, not its memory's owner's.
void note_view(const py::object& view, const py::handle& source) {
  if (!THPVariable_Check(source.ptr())) return;
  PyObject** dict = _PyObject_GetDictPtr(source.ptr());
  PyObject* base = nullptr;
  bool own = false;
  if (dict != nullptr && *dict != nullptr) {
    base = PyDict_GetItemWithError(*dict, shared->forward_base.ptr());
    own = PyDict_GetItemWithError(*dict, shared->tangents.ptr()) != nullptr;
  }
  if (own && (base != nullptr || THPVariable_Unpack(source.ptr()).is_view())) {
    base = source.ptr();
  }
  if (base != nullptr) {
    py::dict view_dict =
        py::reinterpret_steal<py::dict>(PyObject_GenericGetDict(view.ptr(), nullptr));
    view_dict[shared->forward_base] = py::reinterpret_borrow<py::object>(base);
  }
}

const c10::TensorImpl* root(const at::Tensor& t) {
  return t.is_view() ? t._base().unsafeGetTensorImpl() : t.unsafeGetTensorImpl();
}

// The kernel; an error it raises reaches Python as the Python kernel's would
// (torch's translation: the same type and message), with a note naming the op.
Results run_kernel(const OpEntry& op, const Values& primals, const Values& tangents,
                   const Values& outputs) {
  try {
    return op.kernel(primals, tangents, outputs);
  } catch (const py::error_already_set&) {
    throw;
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    py::error_already_set error;
    error.value().attr("add_note")(op.note);
    throw error;
  }
}

void check_shape(const c10::FunctionSchema& schema, const at::Tensor& value,
                 const at::Tensor& output) {
  TORCH_CHECK(value.sizes() == output.sizes(), "JVP rule for ", schema.name(), ".",
              schema.overload_name(), " returned a tangent of shape ", value.sizes(),
              " for an output of shape ", output.sizes());
}

// What the op returns to Python: its one output, or a tuple; outputs autograd
// may save and rebuild are remembered (tangents.remember_saved_outputs).
py::object returned(const std::vector<py::object>& outs, bool tracking,
                    const py::handle& level) {
  if (outs.empty()) return py::none();
  for (size_t k = 0; tracking && k < outs.size(); ++k) {
    each_tensor(outs[k], [&](const py::handle& t) { remember_output(t, level); });
  }
  if (outs.size() == 1) return outs[0];
  py::tuple tuple(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) tuple[k] = outs[k];
  return tuple;
}

// A view op's outputs: each gets the same view of the input's tangent, as it
// is (outputs._attach for a view), and follows its input (mode._note_views).
std::vector<py::object> attach_views(const OpEntry& op, const c10::FunctionSchema& schema,
                        torch::jit::Stack& stack, const Results& results,
                        const py::handle& level, const py::tuple& args) {
  std::vector<py::object> outs;
  for (size_t k = 0; k < stack.size(); ++k) {
    outs.push_back(torch::jit::toPyObject(stack[k]));
    if (!stack[k].isTensor()) continue;
    const at::Tensor& output = stack[k].toTensor();
    const bool differentiable = op.differentiable[k] &&
                                (output.is_floating_point() || output.is_complex());
    if (differentiable && results[k].isTensor()) {
      check_shape(schema, results[k].toTensor(), output);
      py::object tangent = torch::jit::toPyObject(results[k]);
      set_tangent(outs.back(), level, tangent.ptr());
    } else {
      set_tangent(outs.back(), level, shared->no_tangent.ptr());
    }
    if (args.size() > 0) note_view(outs.back(), args[0]);
  }
  return outs;
}

// A tensor subclass without a __torch_dispatch__ of its own (nn.Parameter)
// dispatches as a plain tensor (mode._dispatches_itself); known answers cached.
bool dispatches_plainly(const py::handle& type) {
  static auto* known = new std::unordered_map<PyObject*, bool>();
  auto it = known->find(type.ptr());
  if (it != known->end()) return it->second;
  const bool plain = type.attr("__torch_dispatch__").is(
      shared->tensor_type.attr("__torch_dispatch__"));
  type.inc_ref();  // keyed by the type object: keep it alive
  known->emplace(type.ptr(), plain);
  return plain;
}

// A tensor type make_dual may treat as torch.Tensor: Tensor itself, or a
// subclass with neither dispatch nor torch function of its own (nn.Parameter),
// whose make_dual native returns as a plain Tensor too.
bool acts_plainly(const py::handle& type) {
  if (type.ptr() == shared->tensor_type.ptr()) return true;
  static auto* known = new std::unordered_map<PyObject*, bool>();
  auto it = known->find(type.ptr());
  if (it != known->end()) return it->second;
  const bool plain = dispatches_plainly(type) &&
                     py::object(type.attr("__torch_function__")).is(shared->no_torch_function);
  type.inc_ref();  // keyed by the type object: keep it alive
  known->emplace(type.ptr(), plain);
  return plain;
}

// -- the hot path -----------------------------------------------------------

py::object dispatch(const py::handle& func, const py::handle& types,
                    const py::tuple& args, const py::object& kwargs) {
  const py::object& state = shared->state;
  if (state.attr(names->defer_next).cast<bool>() || state.attr(names->subclass_op).cast<bool>()) {
    return shared->slow;
  }
  for (const py::handle& t : types) {
    if (t.ptr() != shared->tensor_type.ptr() && !dispatches_plainly(t)) {
      return shared->slow;
    }
  }
  // Only level 0 in sight: nested levels (and their derived tangents) are
  // the Python path's.
  const int64_t cap = state.attr(names->cap).cast<int64_t>();
  if (cap != 0 || !c10::AutogradState::get_tls_state().get_fw_grad_mode()) {
    return shared->slow;
  }
  const OpEntry& op = entry_of(func);
  std::vector<PyObject*> tensors;
  for (const py::handle& a : args) collect(a, tensors);
  const bool has_kwargs = !kwargs.is_none() && py::len(kwargs) > 0;
  if (has_kwargs) {
    for (const auto& item : kwargs.cast<py::dict>()) collect(item.second, tensors);
  }
  py::list levels = state.attr(names->levels);
  py::handle level0 = levels[0];
  bool any_tangent = false;
  for (PyObject* obj : tensors) {
    const at::Tensor& t = THPVariable_Unpack(obj);
    if (t.is_complex() || t.is_neg()) return shared->slow;
    PyObject* value = nullptr;
    switch (tangent_at(obj, t, level0, &value)) {
      case Found::Slow: return shared->slow;
      case Found::Tangent: any_tangent = true; break;
      case Found::None: break;
    }
  }
  if (op.detach) {
    // mode._dispatch: a detached alias gets no tangent and follows no tensor's
    // (autograd detaches every output it saves, so this is a common op).
    return op.raw(*args, **(has_kwargs ? kwargs.cast<py::dict>() : py::dict()));
  }
  if (!any_tangent) {
    py::object out = op.raw(*args, **(has_kwargs ? kwargs.cast<py::dict>() : py::dict()));
    if (op.is_view_op && args.size() > 0) {  // mode._note_views
      each_tensor(out, [&](const py::handle& t) {
        note_view(py::reinterpret_borrow<py::object>(t), args[0]);
      });
    }
    return out;
  }
  if (!op.fast) return shared->slow;
  const c10::FunctionSchema& schema = op.handle->schema();
  torch::jit::Stack stack = bind_stack(schema, args, kwargs);
  // The tangents of the differentiable inputs, by their Python objects.
  const bool grad_mode = at::GradMode::is_enabled();
  bool tracking = false;  // autograd records (tracked._tracking)
  Values tangents;
  tangents.reserve(op.inputs.size());
  bool present = false;
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    const size_t i = op.inputs[j];
    const auto& argument = schema.arguments()[i];
    py::handle obj;
    if (!argument.kwarg_only() && i < args.size()) {
      obj = args[i];
    } else if (has_kwargs && kwargs.contains(argument.name())) {
      obj = kwargs[py::str(argument.name())];
    }
    if (op.list_inputs[j]) {
      if (obj && !obj.is_none()) return shared->slow;  // lists: the Python path
      tangents.emplace_back();
      continue;
    }
    if (!obj || !THPVariable_Check(obj.ptr())) {
      tangents.emplace_back();
      continue;
    }
    const at::Tensor& primal = THPVariable_Unpack(obj.ptr());
    PyObject* value = nullptr;
    if (tangent_at(obj.ptr(), primal, level0, &value) != Found::Tangent ||
        !THPVariable_Check(value)) {
      tangents.emplace_back();
      continue;
    }
    const at::Tensor& tangent = THPVariable_Unpack(value);
    if (!plain(tangent) || tangent.scalar_type() != primal.scalar_type()) {
      return shared->slow;
    }
    tracking = tracking || (grad_mode && tangent.requires_grad());
    tangents.emplace_back(tangent);
    present = true;
  }
  for (size_t i = 0; grad_mode && !tracking && i < tensors.size(); ++i) {
    tracking = THPVariable_Unpack(tensors[i]).requires_grad();
  }
  if (!present) {
    return op.raw(*args, **(has_kwargs ? kwargs.cast<py::dict>() : py::dict()));
  }
  if (tracking && op.view && op.uses_outputs) return shared->slow;
  const Values primals(stack.begin(), stack.end());
  // Formulas run as the Python kernels do (tangents.autograd_enabled): with the
  // keys the user's context has, so the views they make are tracked as views
  // (`_base`, version counters) and they are differentiable.
  const auto user_exclude = user_exclude_keys(state);
  const auto included = c10::impl::tls_local_dispatch_key_set().included_;
  Values kernel_outputs;
  if (tracking && op.uses_outputs) {
    // tracked._run_tracked: the op runs once, recorded, so the outputs the
    // formula reads are in the graph; the mode hands back detached aliases.
    {
      c10::impl::ForceDispatchKeyGuard keys(included, user_exclude);
      op.handle->callBoxed(stack);
    }
    kernel_outputs.assign(stack.begin(), stack.end());
    c10::impl::ExcludeDispatchKeyGuard no_python(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    for (c10::IValue& out : stack) {
      if (out.isTensor() && out.toTensor().defined() && out.toTensor().requires_grad()) {
        out = c10::IValue(out.toTensor().detach());
      }
    }
  } else {
    op.handle->callBoxed(stack);  // the op, once
  }
  c10::impl::ForceDispatchKeyGuard keys(included, user_exclude);
  Results results =
      run_kernel(op, primals, tangents, kernel_outputs.empty() ? stack : kernel_outputs);
  if (op.view) {
    return returned(attach_views(op, schema, stack, results, level0, args), tracking,
                    level0);
  }
  // Lay out and attach: as outputs._attach, for a functional op.
  std::vector<const c10::TensorImpl*> roots;
  for (const c10::IValue& t : tangents) {
    if (t.isTensor()) roots.push_back(root(t.toTensor()));
  }
  std::vector<c10::IValue> laid_out(stack.size());
  for (size_t k = 0; k < stack.size(); ++k) {
    if (!stack[k].isTensor() || !results[k].isTensor() || !op.differentiable[k]) continue;
    const at::Tensor& output = stack[k].toTensor();
    if (!output.defined()) continue;  // not computed (a backward op's output_mask)
    if (!output.is_floating_point() && !output.is_complex()) continue;
    at::Tensor value = results[k].toTensor();
    check_shape(schema, value, output);
    if (value.scalar_type() != output.scalar_type() &&
        !(value.is_complex() && !output.is_complex())) {
      value = value.to(output.scalar_type());
    }
    const bool fresh =
        std::find(roots.begin(), roots.end(), root(value)) != roots.end();
    laid_out[k] = conform_layout(value, output, fresh);
  }
  std::vector<py::object> outs;
  for (size_t k = 0; k < stack.size(); ++k) {
    outs.push_back(torch::jit::toPyObject(stack[k]));
    if (!stack[k].isTensor()) continue;
    if (laid_out[k].isTensor()) {
      py::object tangent = torch::jit::toPyObject(laid_out[k]);
      set_tangent(outs.back(), level0, tangent.ptr());
    } else if (stack[k].toTensor().defined() && stack[k].toTensor().is_view()) {
      set_tangent(outs.back(), level0, shared->no_tangent.ptr());
    }
  }
  return returned(outs, tracking, level0);
}

// forward_ad.make_dual's common case (level 0 the only level, plain floating
// tensors, a primal without a tangent, a tangent that is no dual): the alias
// of the primal carrying the tangent, laid out as native lays it out.
py::object make_dual(const py::handle& tensor, const py::handle& tangent,
                     const py::handle& level) {
  const py::object& state = shared->state;
  if (state.attr(names->cap).cast<int64_t>() != 0 ||
      !c10::AutogradState::get_tls_state().get_fw_grad_mode() ||
      c10::impl::TorchDispatchModeTLS::stack_len() != 1 ||
      !acts_plainly(py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(Py_TYPE(tensor.ptr())))) ||
      !THPVariable_Check(tangent.ptr())) {
    return shared->slow;
  }
  const at::Tensor& primal = THPVariable_Unpack(tensor.ptr());
  const at::Tensor& value = THPVariable_Unpack(tangent.ptr());
  if (!plain(primal) || !plain(value) || !primal.is_floating_point() ||
      !value.is_floating_point() || primal.sizes() != value.sizes()) {
    return shared->slow;  // and the Python path's errors
  }
  PyObject* found = nullptr;
  if (tangent_at(tensor.ptr(), primal, level, &found) != Found::None) return shared->slow;
  PyObject** tangent_dict = _PyObject_GetDictPtr(tangent.ptr());
  if ((tangent_dict && *tangent_dict && PyDict_Size(*tangent_dict) > 0) || value.is_view() ||
      value.requires_grad()) {
    return shared->slow;  // a tangent that may itself be dual
  }
  at::Tensor dual;
  {
    c10::impl::ExcludeDispatchKeyGuard no_python(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    dual = at::alias(primal);
  }
  py::object out = py::reinterpret_steal<py::object>(THPVariable_Wrap(dual));
  note_view(out, tensor);
  py::object laid_out =
      py::reinterpret_steal<py::object>(THPVariable_Wrap(conform_layout(value, primal, false)));
  set_tangent(out, level, laid_out.ptr());
  return out;
}

void bind_state(py::object state, py::object tangents, py::object no_tangent,
                py::object forward_base, py::object slow, py::object describe) {
  if (shared == nullptr) {
    shared = new Shared();
    names = new Names();
    ops = new std::unordered_map<PyObject*, OpEntry>();
  }
  *shared = Shared{state, tangents, no_tangent, forward_base, slow, describe,
                   py::module_::import("torch").attr("Tensor"),
                   py::module_::import("torch").attr("ops").attr("aten").attr("detach").attr("default"),
                   py::module_::import("torch").attr("_C").attr("_disabled_torch_function_impl"),
                   py::module_::import("dualgen.levels").attr("sweep_tensors")};
  forget();
}

}  // namespace

void forget() {
  if (ops == nullptr) return;
  for (auto& item : *ops) Py_DECREF(item.first);
  ops->clear();
}

void bind_fast_path(py::module_& m) {
  m.def("bind_state", &bind_state);
  m.def("dispatch", &dispatch);
  m.def("make_dual", &make_dual);
  m.def("forget_ops", &forget, "drop what the hot path knows of each op (rules changed)");
}

}  // namespace dualgen
