// The per-op hot path: the dispatch mode's work for the common op, in C++.
//
// DualMode.__torch_dispatch__ calls `dispatch` first. It handles an op when the
// Python path would do nothing more than this: plain tensors (no subclass, no
// conjugate or negative views, no vmap), fw grad enabled, the innermost level
// with a tangent being level 0, a generated functional kernel (no user rule),
// no autograd recording (nothing requires grad), tangents in their primals'
// dtypes, and every input tangent a tensor's own or a rebuilt saved output's
// (not derived from a view's base). Then it binds the arguments, reads the
// tangents, runs the op once, runs the C++ kernel, lays each tangent out as native does
// and attaches it where the Python code reads tangents (the tensor's
// `__dict__`, keyed by the Level object, and the Level's list of tensors): one
// store, read by both. Anything else returns `SLOW` before the op runs, and the
// Python path handles it; the choice is made before the op runs.
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_cpp_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "dualgen/hot_path_bindings.h"
#include "dualgen/hot_path.h"
#include "dualgen/kernel.h"
#include "dualgen/layout.h"
#include "dualgen/store.h"
#include "dualgen/values.h"

#include <typeindex>
#include <unordered_set>

namespace py = pybind11;

namespace dualgen {

Registry& registry();

thread_local bool in_front = false;

namespace {

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

}  // namespace

FormulaKeys formula_keys() {
  FormulaKeys keys{c10::impl::tls_local_dispatch_key_set().included_,
                   user_exclude_keys(shared->state)};
  if (in_front) {
    keys.included = keys.included - python_keys;
    keys.excluded = keys.excluded | python_keys;
  }
  return keys;
}

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

namespace {

std::unordered_map<PyObject*, OpEntry>* ops = nullptr;

// An OpOverload's operator in the dispatcher (its default overload named "").
std::optional<c10::OperatorHandle> handle_of(const py::handle& func) {
  const auto name = func.attr("_schema").attr("name").cast<std::string>();
  auto overload = func.attr("_overloadname").cast<std::string>();
  if (overload == "default") overload = "";
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

const OpEntry& entry_of(const py::handle& func) {
  auto it = ops->find(func.ptr());
  if (it != ops->end()) return it->second;
  OpEntry entry;
  py::object described = shared->describe(func);
  if (!described.is_none()) {
    auto t = described.cast<py::tuple>();
    entry.kernel = registry().find(t[0].cast<std::string>());
    entry.inputs = t[1].cast<std::vector<size_t>>();
    entry.list_inputs = t[2].cast<std::vector<bool>>();
    entry.differentiable = t[3].cast<std::vector<bool>>();
    entry.note = t[4].cast<std::string>();
    entry.view = t[5].cast<bool>();
    entry.uses_outputs = t[6].cast<bool>();
    entry.inplace = t[7].cast<bool>();
    entry.original_self = t[8].cast<bool>();
    if (!t[9].is_none()) entry.view_form = handle_of(t[9]);
    entry.recorded = static_cast<OpEntry::Recorded>(t[10].cast<int>());
  }
  const auto name = func.attr("_schema").attr("name").cast<std::string>();
  const auto overload = func.attr("_overloadname").cast<std::string>();
  entry.handle = handle_of(func);
  entry.fast = entry.kernel != nullptr && entry.handle.has_value();
  entry.copy = name == "aten::copy_" && overload == "default";
  entry.raw = func.attr("_op");
  entry.is_view_op = func.attr("is_view").cast<bool>();
  entry.detach = func.is(shared->detach);
  // Inside a dual level every collective carries tangents, zeros included, so
  // that all ranks send the same message: never run plainly here.
  entry.collective = name.rfind("c10d::", 0) == 0 || name.rfind("_c10d_functional::", 0) == 0;
  func.inc_ref();  // entries are keyed by the op object: keep it alive
  return ops->emplace(func.ptr(), std::move(entry)).first->second;
}

// Whether the autograd node that recorded `t` keeps it as a saved output (a
// `_saved_` field named for one of the op's returns: `result`, `resultN` or a
// named return, as torch's generated nodes name them): only such an output
// comes back later as a rebuilt tensor, whose tangent is found by geometry.
// (A saved input is handed back as itself.) Known per node type.
bool kept_by_its_node(const c10::FunctionSchema& schema, const at::Tensor& t) {
  const auto& node = t.grad_fn();
  if (!node) return false;
  static auto* known = new std::unordered_map<std::type_index, bool>();
  const std::type_index type(typeid(*node));
  auto it = known->find(type);
  if (it != known->end()) return it->second;
  std::unordered_set<std::string> fields{"_saved_result"};
  const auto& returns = schema.returns();
  for (size_t k = 0; k < returns.size(); ++k) {
    fields.insert("_saved_result" + std::to_string(k));
    if (!returns[k].name().empty()) fields.insert("_saved_" + returns[k].name());
  }
  py::object fn = py::reinterpret_steal<py::object>(torch::autograd::functionToPyObject(node));
  bool keeps = false;
  for (const py::handle& name : py::module_::import("builtins").attr("dir")(fn)) {
    keeps = keeps || fields.count(name.cast<std::string>()) > 0;
  }
  known->emplace(type, keeps);
  return keeps;
}

// Whether the front kernel runs a recorded op a second time for its formula
// (policy.front_when_recorded): where it may, and its operands are small
// enough that running it again costs less than the mode's round trip (which
// runs it once, and whose nodes share the outputs' memory).
bool runs_again(const OpEntry& op, const torch::jit::Stack& stack) {
  if (op.recorded != OpEntry::Recorded::Again) return false;
  constexpr int64_t most = int64_t{1} << 14;  // elements over all tensor operands
  int64_t elements = 0;
  return !any_tensor(stack, [&](const at::Tensor& t) { return (elements += t.numel()) > most; });
}

// What the op returns to Python: its one output, or a tuple; outputs autograd
// saves and will rebuild are remembered (tangents.remember_saved_outputs).
py::object returned(const std::vector<py::object>& outs, bool tracking, const OpEntry& op,
                    const c10::FunctionSchema& schema, const py::handle& level) {
  if (outs.empty()) return py::none();
  // From the mode, a tangent computed from the recorded outputs has a graph
  // holding their memory, which holds the entry: the entry holds it weakly
  // until it moves to the output's node (saved_tangents.saved_form).
  const bool weakly = !in_front && op.uses_outputs;
  for (size_t k = 0; tracking && k < outs.size(); ++k) {
    // (From the mode, below autograd, the node that will record an output is
    // not made yet: every output is remembered.)
    each_tensor(outs[k], [&](const py::handle& t) {
      if (!in_front || kept_by_its_node(schema, THPVariable_Unpack(t.ptr()))) {
        remember_output(t, level, weakly);
      }
    });
  }
  if (outs.size() == 1) return outs[0];
  py::tuple tuple(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) tuple[k] = outs[k];
  return tuple;
}

}  // namespace

// (declared in hot_path.h: inplace.cpp takes batched tangents too)
bool batched_by_legacy_vmap(const at::Tensor& t) {
  return t.key_set().has(c10::DispatchKey::Batched);
}

// (layout.py: kept, or copied per batch element into the primal's layout)
at::Tensor conform_batched(const at::Tensor& tangent, const at::Tensor& output, bool fresh) {
  // The common case, kept as it is (layout.same_layout, whose storage test a
  // batched tangent of a plain primal passes): the primal's logical geometry.
  if (!fresh && plain(output) && !batched_by_legacy_vmap(output) &&
      same_geometry(tangent, output)) {
    return tangent;
  }
  static py::object* conform = nullptr;
  if (conform == nullptr) {
    conform = new py::object(py::module_::import("dualgen.layout").attr("conform_layout"));
  }
  py::object laid_out = (*conform)(tangent, output, fresh);
  return THPVariable_Unpack(laid_out.ptr());
}

namespace {

// One output tensor's tangent (outputs._attach_one): a view op's as it is, a
// functional op's in its output's dtype and layout (`fresh`: an input's
// tangent, stored as a copy); none for a view without one.
void attach_one(const OpEntry& op, const c10::FunctionSchema& schema, const py::object& out,
                const at::Tensor& output, const c10::IValue& value, bool differentiable,
                bool fresh, const py::handle& level) {
  if (!output.defined()) return;  // not computed (a backward op's output_mask)
  differentiable = differentiable && (output.is_floating_point() || output.is_complex());
  if (!differentiable || !value.isTensor()) {
    if (op.view || output.is_view()) set_tangent(out, level, shared->no_tangent.ptr());
    return;
  }
  at::Tensor tangent = value.toTensor();
  check_shape(schema, tangent, output);
  if (!op.view) {
    if (tangent.scalar_type() != output.scalar_type() &&
        !(tangent.is_complex() && !output.is_complex())) {
      tangent = tangent.to(output.scalar_type());
    }
    tangent = batched_by_legacy_vmap(tangent) ? conform_batched(tangent, output, fresh)
                                              : conform_layout(tangent, output, fresh);
  }
  py::object wrapped = py::reinterpret_steal<py::object>(THPVariable_Wrap(tangent));
  set_tangent(out, level, wrapped.ptr());
}

// Each output gets its tangent (outputs._attach), a list's piece by piece; a
// view op's outputs follow `source`, its first argument (mode._note_views).
std::vector<py::object> attach(const OpEntry& op, const c10::FunctionSchema& schema,
                               const torch::jit::Stack& stack, const Results& results,
                               const Values& tangents, const py::handle& level,
                               const py::object& source) {
  std::vector<const c10::TensorImpl*> roots;  // outputs._shared_with_inputs
  for (const c10::IValue& t : tangents) {
    if (t.isTensor()) roots.push_back(root(t.toTensor()));
  }
  std::vector<py::object> outs;
  for (size_t k = 0; k < stack.size(); ++k) {
    outs.push_back(torch::jit::toPyObject(stack[k]));
    if (stack[k].isTensor()) {
      const c10::IValue& value = results[k];
      const bool fresh = !op.view && value.isTensor() &&
                         std::find(roots.begin(), roots.end(), root(value.toTensor())) !=
                             roots.end();
      attach_one(op, schema, outs.back(), stack[k].toTensor(), value, op.differentiable[k],
                 fresh, level);
    } else if (stack[k].isTensorList()) {
      const auto outputs = stack[k].toTensorList();
      const bool have = results[k].isList();
      py::list items = outs.back();
      for (size_t e = 0; e < outputs.size(); ++e) {
        const c10::IValue value = have ? results[k].toListRef()[e] : c10::IValue();
        attach_one(op, schema, items[e], outputs[e], value, op.differentiable[k], false, level);
      }
    }
    if (op.is_view_op && source) {
      each_tensor(outs.back(), [&](const py::handle& t) {
        note_view(py::reinterpret_borrow<py::object>(t), source);
      });
    }
  }
  return outs;
}

}  // namespace

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

namespace {

// -- the hot path -----------------------------------------------------------

// The tangent of one input tensor at `level` (tangents.argument_tangent), into
// `tangent` (undefined if none); false where the Python path must read it (a
// tangent derived from a base, a complex or lazily negated one, one of
// another dtype than its primal's).
bool read_tangent(const at::Tensor& primal, const py::handle& level, bool grad_mode,
                  at::Tensor& tangent, bool& tracking) {
  PyObject* value = nullptr;
  const Found found = tangent_at(python_of(primal), primal, level, &value);
  if (found == Found::Slow) return false;
  if (found == Found::None || !THPVariable_Check(value)) return true;
  const at::Tensor& t = THPVariable_Unpack(value);
  const bool batched = batched_by_legacy_vmap(t) && !t.is_complex() && !t.is_neg();
  if (!(plain(t) || batched) || t.scalar_type() != primal.scalar_type()) {
    return false;
  }
  tracking = tracking || (grad_mode && t.requires_grad());
  tangent = t;
  return true;
}

bool returns_list(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns()) {
    if (r.type()->kind() == c10::TypeKind::ListType) return true;
  }
  return false;
}

// What the arguments' tangents at `level` ask for: none anywhere, some of
// their own, or the Python path (a derived tangent, a complex, negated or
// nested tensor).
enum class Scan { None, Tangents, Slow };

Scan scan(const torch::jit::Stack& stack, const py::handle& level) {
  bool any = false;
  const bool slow = any_tensor(stack, [&](const at::Tensor& t) {
    if (t.is_complex() || t.is_neg() || t.is_nested()) return true;
    PyObject* value = nullptr;
    const Found found = tangent_at(python_of(t), t, level, &value);
    any = any || found == Found::Tangent;
    return found == Found::Slow;
  });
  return slow ? Scan::Slow : any ? Scan::Tangents : Scan::None;
}

// The first argument as a Python object (the source of a view op's outputs,
// an in-place op's self), made if it has none; null if it is no tensor.
py::object first_argument(const torch::jit::Stack& stack) {
  if (stack.empty() || !stack[0].isTensor()) return py::object();
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(stack[0].toTensor()));
}

// Whether the views an op makes of `source` must be noted (levels.note_view):
// only a source with entries of its own, or following another's, is noted.
bool notes_views_of(const torch::jit::Stack& stack) {
  if (stack.empty() || !stack[0].isTensor()) return false;
  PyObject* obj = python_of(stack[0].toTensor());
  PyObject** dict = obj ? _PyObject_GetDictPtr(obj) : nullptr;
  return dict && *dict && PyDict_Size(*dict) > 0;
}

// The op on its bound arguments, no tangent to compute: run as it is, a view
// op's outputs following its source's tangent (mode._note_views). Null: the
// outputs are on the stack only.
py::object run_plainly(const OpEntry& op, torch::jit::Stack& stack) {
  const bool note = op.is_view_op && !op.detach && notes_views_of(stack);
  py::object source = note ? first_argument(stack) : py::object();
  op.handle->callBoxed(stack);
  if (!note) return py::object();
  py::object out = torch::jit::createPyObjectForStack(torch::jit::Stack(stack));
  each_tensor(out, [&](const py::handle& t) {
    note_view(py::reinterpret_borrow<py::object>(t), source);
  });
  return out;
}

// The hot path on the op's bound arguments: SLOW (nothing run, the stack as
// it was); or the op run, its outputs on the stack, returned as Python objects
// where they were made (null where they were not: no tangent to attach).
py::object run_bound(const OpEntry& op, torch::jit::Stack& stack, const py::handle& level0) {
  const Scan scanned = scan(stack, level0);
  if (scanned == Scan::Slow) return shared->slow;
  // mode._dispatch: a detached alias gets no tangent and follows no tensor's
  // (autograd detaches every output it saves, so this is a common op).
  if (op.detach || scanned == Scan::None) return run_plainly(op, stack);
  if (!op.fast) return shared->slow;
  const c10::FunctionSchema& schema = op.handle->schema();
  // The tangents of the differentiable inputs.
  const bool grad_mode = at::GradMode::is_enabled();
  bool tracking = false;  // autograd records (tracked._tracking)
  Values tangents;
  tangents.reserve(op.inputs.size());
  bool present = false;
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    const c10::IValue& argument = stack[op.inputs[j]];
    c10::IValue tangent;
    if (op.list_inputs[j] && argument.isList()) {
      // tangents.argument_tangent of a list: None where absent, or None for all
      c10::List<std::optional<at::Tensor>> items;
      bool any = false;
      for (const c10::IValue& item : argument.toListRef()) {
        at::Tensor t;
        if (item.isTensor() && item.toTensor().defined() &&
            !read_tangent(item.toTensor(), level0, grad_mode, t, tracking)) {
          return shared->slow;
        }
        any = any || t.defined();
        items.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
      }
      if (any) tangent = c10::IValue(items);
    } else if (argument.isTensor() && argument.toTensor().defined()) {
      at::Tensor t;
      if (!read_tangent(argument.toTensor(), level0, grad_mode, t, tracking)) {
        return shared->slow;
      }
      if (t.defined()) tangent = c10::IValue(t);
    }
    present = present || !tangent.isNone();
    tangents.push_back(std::move(tangent));
  }
  if (grad_mode && !tracking) {
    tracking = any_tensor(stack, [](const at::Tensor& t) { return t.requires_grad(); });
  }
  if (!present) return run_plainly(op, stack);
  if (op.inplace) {
    // Recording an in-place op (tracked), or a lens update: the Python path's.
    const at::Tensor self_tangent =
        tangents[0].isTensor() ? tangents[0].toTensor() : at::Tensor();
    py::object self = first_argument(stack);
    if (op.view_form && self && self_tangent.defined() &&
        batched_by_legacy_vmap(self_tangent) && tangents.size() == 1) {
      return update_batched_view(op, stack, self_tangent, self, level0, tracking);
    }
    if (tracking || !self || !updates_plainly(self, self_tangent, tangents, level0)) {
      return shared->slow;
    }
    // An in-place view op without a view form (resize_, set_) cannot reshape a
    // batched tangent: the Python path refuses it, saying why.
    if (op.handle->hasTag(at::Tag::inplace_view) &&
        any_tensor(tangents, batched_by_legacy_vmap)) {
      return shared->slow;
    }
    return update_in_place(op, stack, tangents, self, level0);
  }
  if (tracking && !in_front && op.uses_outputs && (op.view || returns_list(schema))) {
    return shared->slow;
  }
  if (tracking && in_front && op.recorded != OpEntry::Recorded::Once && !runs_again(op, stack)) {
    return shared->slow;
  }
  py::object source = op.is_view_op ? first_argument(stack) : py::object();
  const Values primals(stack.begin(), stack.end());
  // Formulas run as the Python kernels do (tangents.autograd_enabled): with the
  // keys the user's context has, so the views they make are tracked as views
  // (`_base`, version counters) and they are differentiable.
  const FormulaKeys formula = formula_keys();
  Values kernel_outputs;
  if (in_front) {
    // Above autograd: the op runs through it, recorded as native records it.
    op.handle->callBoxed(stack);
    if (tracking && op.recorded == OpEntry::Recorded::Again) {  // (Again: it reads outputs)
      // The formula reads outputs of a second run, recorded on a node of its
      // own: read from the user's, the tangent's graph would hold the user's
      // node, which holds the tangent (saved outputs), until the level ends.
      torch::jit::Stack again(primals.begin(), primals.end());
      op.handle->callBoxed(again);
      kernel_outputs.assign(again.begin(), again.end());
    }
    // Otherwise the formula reads the outputs the user gets (those autograd saves).
  } else if (tracking && op.uses_outputs) {
    // tracked._run_tracked: the op runs once, recorded, so the outputs the
    // formula reads are in the graph; the mode hands back detached aliases.
    {
      c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
      op.handle->callBoxed(stack);
    }
    kernel_outputs.assign(stack.begin(), stack.end());
    c10::impl::ExcludeDispatchKeyGuard no_python(python_keys);
    for (c10::IValue& out : stack) {
      if (out.isTensor() && out.toTensor().defined() && out.toTensor().requires_grad()) {
        out = c10::IValue(out.toTensor().detach());
      }
    }
  } else {
    op.handle->callBoxed(stack);  // the op, once
  }
  c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
  const Results results =
      run_kernel(op, primals, tangents, kernel_outputs.empty() ? stack : kernel_outputs);
  return returned(attach(op, schema, stack, results, tangents, level0, source), tracking, op,
                  schema, level0);
}

// What dispatch and the front kernel check first: nothing the Python path must
// see (a deferred op, a subclass's), only level 0 in sight (nested levels and
// their derived tangents are the Python path's), the forward-grad switch on.
// Level 0 into `level0`.
bool hot_path_applies(py::handle& level0) {
  const py::object& state = shared->state;
  if (state.attr(names->defer_next).cast<bool>() || state.attr(names->subclass_op).cast<bool>()) {
    return false;
  }
  // Saved outputs' tangents to move onto their nodes (saved_tangents.py), as
  // the mode does before an op that may consume those outputs.
  if (PyList_GET_SIZE(state.attr(names->saved_to_move).ptr()) != 0) {
    static py::object* move = nullptr;
    if (move == nullptr) {
      move = new py::object(
          py::module_::import("dualgen.saved_tangents").attr("move_saved_tangents"));
    }
    (*move)();
  }
  if (state.attr(names->cap).cast<int64_t>() != 0 ||
      !c10::AutogradState::get_tls_state().get_fw_grad_mode()) {
    return false;
  }
  py::list levels = state.attr(names->levels);
  level0 = levels[0];  // (the state's list holds it)
  return true;
}

}  // namespace

py::object dispatch(const py::handle& func, const py::handle& types,
                    const py::tuple& args, const py::object& kwargs) {
  for (const py::handle& t : types) {
    if (t.ptr() != shared->tensor_type.ptr() && !dispatches_plainly(t)) {
      return shared->slow;
    }
  }
  py::handle level0;
  if (!hot_path_applies(level0)) return shared->slow;
  const OpEntry& op = entry_of(func);
  if (op.collective) return shared->slow;
  std::optional<torch::jit::Stack> stack;
  if (op.handle) {
    try {
      stack = bind_stack(op.handle->schema(), args, kwargs);
    } catch (const std::exception&) {  // (py::error_already_set included)
      stack.reset();
    }
  }
  // Arguments that do not bind (a Python value the schema's type cannot take)
  // are OpOverload's to take or refuse, by the Python path.
  if (!stack) return shared->slow;
  py::object out = run_bound(op, *stack, level0);
  if (!out) return torch::jit::createPyObjectForStack(std::move(*stack));
  return out;
}

bool dispatch_stack(const py::handle& func, torch::jit::Stack& stack) {
  py::handle level0;
  if (!hot_path_applies(level0)) return false;
  const OpEntry& op = entry_of(func);
  if (!op.handle || op.collective) return false;
  return !run_bound(op, stack, level0).is(shared->slow);
}

namespace {

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

void bind_hot_path(py::module_& m) {
  m.def("bind_state", &bind_state);
  m.def("dispatch", &dispatch);
  m.def("make_dual", &make_dual);
  m.def("unpack_dual", &unpack_dual);
  m.def("drop_entries", &drop_entries, "levels.clear_level's loop over the level's tensors");
  m.def("forget_ops", &forget, "drop what the hot path knows of each op (rules changed)");
}

}  // namespace dualgen
