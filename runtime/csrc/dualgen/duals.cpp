// forward_ad.make_dual's and unpack_dual's common cases in C++ (the hot path's
// store, store.h): a level's fixed cost, paid once per input and output.
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/python_variable.h>

#include "dualgen/hot_path.h"
#include "dualgen/layout.h"
#include "dualgen/store.h"

namespace dualgen {

namespace {

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

// What make_dual's and unpack_dual's common cases share: level 0 the only
// level, the forward-grad switch on, dualgen's mode the only mode, and a
// tensor that acts as torch.Tensor.
bool level0_plainly(const py::handle& tensor) {
  return shared->state.attr(names->cap).cast<int64_t>() == 0 &&
         c10::AutogradState::get_tls_state().get_fw_grad_mode() &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 1 &&
         acts_plainly(py::reinterpret_borrow<py::object>(
             reinterpret_cast<PyObject*>(Py_TYPE(tensor.ptr()))));
}

// levels.mark_forward_root at level 0 alone (level0_plainly): t's tangents
// are its own at every level (make_dual's result, unpack_dual's primal), so the
// levels at which it is a view of its source are none, written without a call
// into Python (once per dual made or unpacked: the tiny-model hot path).
void mark_forward_root(const py::object& t) {
  static py::object* root_key = nullptr;
  static py::object* no_levels = nullptr;
  if (root_key == nullptr) {
    root_key = new py::object(py::module_::import("dualgen.levels").attr("FORWARD_ROOT"));
    no_levels = new py::object(py::tuple());
  }
  py::dict dict = py::reinterpret_steal<py::dict>(PyObject_GenericGetDict(t.ptr(), nullptr));
  dict[*root_key] = *no_levels;
}

// make_dual's result and unpack_dual's primal: an alias of `source` (the
// tensor of `tensor`) made below dualgen's mode, a view of `tensor` and a root
// of the forward levels (mark_forward_root).
py::object root_alias(const at::Tensor& source, const py::handle& tensor) {
  at::Tensor alias;
  {
    c10::impl::ExcludeDispatchKeyGuard no_python(python_keys);
    alias = at::alias(source);
  }
  py::object out = py::reinterpret_steal<py::object>(THPVariable_Wrap(alias));
  note_view(out, tensor);
  mark_forward_root(out);
  return out;
}

}  // namespace

// forward_ad.make_dual's common case (level 0 the only level, plain floating
// tensors, a primal without a tangent, a tangent that is no dual): the alias
// of the primal carrying the tangent, laid out as native lays it out.
py::object make_dual(const py::handle& tensor, const py::handle& tangent,
                     const py::handle& level) {
  if (!level0_plainly(tensor) || !THPVariable_Check(tangent.ptr())) return shared->slow;
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
  py::object out = root_alias(primal, tensor);
  py::object laid_out =
      py::reinterpret_steal<py::object>(THPVariable_Wrap(conform_layout(value, primal, false)));
  set_tangent(out, level, laid_out.ptr());
  return out;
}

// forward_ad.unpack_dual's common case (level 0 the only level, a plain
// floating tensor whose tangent, if any, is its own entry): the tangent, and
// the primal as an alias marked as having none at the level.
py::object unpack_dual(const py::handle& tensor, const py::handle& level) {
  if (!level0_plainly(tensor)) return shared->slow;
  const at::Tensor& dual = THPVariable_Unpack(tensor.ptr());
  if (!plain(dual)) return shared->slow;
  PyObject* found = nullptr;
  py::object tangent = py::none();
  switch (tangent_at(tensor.ptr(), dual, level, &found)) {
    case Found::Slow: return shared->slow;  // derived from a base
    case Found::Tangent: tangent = py::reinterpret_borrow<py::object>(found); break;
    case Found::None: break;
  }
  py::object primal = root_alias(dual, tensor);
  set_tangent(primal, level, shared->no_tangent.ptr());
  return py::make_tuple(primal, tangent);
}

}  // namespace dualgen
