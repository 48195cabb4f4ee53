// In-place ops on the hot path: runtime/dispatch/inplace.py's work for the common case,
// an update of a tangent of self's own whose elements do not share memory, or
// a first tangent for a self that is no view, with no autograd recording; the
// tangents plain or batched by legacy vmap (the high-level API's jacobians).
#include <torch/csrc/autograd/python_variable.h>

#include "dualgen/hot_path.h"
#include "dualgen/layout.h"
#include "dualgen/store.h"

namespace dualgen {

namespace {

// The memory t's elements lie in (inplace.storage_key); null without storage
// (a tensor batched by vmap has none to read: its storage access throws).
const void* memory_of(const at::Tensor& t) {
  if (batched_by_legacy_vmap(t) || !t.has_storage()) return nullptr;
  return t.storage().data_ptr().get();
}

// Whether a and b lie in the same memory: the same address on the same device
// (devices' addresses are their own; storages without memory, a batched or a
// meta tensor's, are taken as shared, which only costs a copy).
bool same_memory(const at::Tensor& a, const at::Tensor& b) {
  return memory_of(a) == memory_of(b) && a.device() == b.device();
}

// Whether elements of t share memory (a stride-0 dimension of size > 1): an
// update writes each location once (inplace._write_shared, in Python).
bool has_shared_elements(const at::Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) == 0) return true;
  }
  return false;
}

// inplace._separate_from_self: the formula reads the other operands as they were
// before the update, so one sharing memory with self is read from a copy, and
// so is a tangent sharing memory with self's, which the update writes into.
void separate_from_self(Values& primals, Values& tangents, const at::Tensor& self_tangent) {
  const at::Tensor& self = primals[0].toTensor();
  for (size_t i = 1; i < primals.size(); ++i) {
    if (primals[i].isTensor() && same_memory(primals[i].toTensor(), self)) {
      primals[i] = primals[i].toTensor().clone();
    }
  }
  if (!self_tangent.defined()) return;
  for (size_t j = 1; j < tangents.size(); ++j) {
    if (tangents[j].isTensor() && same_memory(tangents[j].toTensor(), self_tangent)) {
      tangents[j] = tangents[j].toTensor().clone();
    }
  }
}

bool same_dtype(const c10::IValue& tangent, at::ScalarType dtype) {
  if (tangent.isTensor()) return tangent.toTensor().scalar_type() == dtype;
  if (!tangent.isList()) return true;
  for (const c10::IValue& item : tangent.toListRef()) {
    if (item.isTensor() && item.toTensor().scalar_type() != dtype) return false;
  }
  return true;
}

}  // namespace

bool updates_plainly(const py::handle& self, const at::Tensor& self_tangent,
                     const Values& tangents, const py::handle& level) {
  if (!THPVariable_Check(self.ptr())) return false;
  const at::Tensor& t = THPVariable_Unpack(self.ptr());
  if (!t.is_floating_point() || !plain(t)) return false;
  if (self_tangent.defined()) return !has_shared_elements(self_tangent);
  // A first tangent: in self's dtype when the operands' are (else
  // dtypes._promoted_for_self), and self's own unless self is a view without
  // an entry of its own (then it lives on the base: layout.set_new_tangent).
  for (const c10::IValue& tangent : tangents) {
    if (!same_dtype(tangent, t.scalar_type())) return false;
  }
  PyObject** dict = _PyObject_GetDictPtr(self.ptr());
  PyObject* own = (dict && *dict) ? *dict : nullptr;
  PyObject* entries = own ? PyDict_GetItemWithError(own, shared->tangents.ptr()) : nullptr;
  PyObject* value = entries ? PyDict_GetItemWithError(entries, level.ptr()) : nullptr;
  if (value == shared->no_tangent.ptr()) return true;
  const bool follows = own && PyDict_GetItemWithError(own, shared->forward_base.ptr());
  return !follows && !t.is_view();
}

py::object update_in_place(const OpEntry& op, torch::jit::Stack& stack, Values& tangents,
                           const py::handle& self, const py::handle& level) {
  const at::Tensor self_tangent =
      tangents[0].isTensor() ? tangents[0].toTensor() : at::Tensor();
  const FormulaKeys formula = formula_keys();
  if (op.copy && self_tangent.defined() && tangents.size() > 1 && tangents[1].isTensor() &&
      stack[1].isTensor() && same_memory(stack[1].toTensor(), stack[0].toTensor()) &&
      same_memory(tangents[1].toTensor(), self_tangent)) {
    // torch copies from memory overlapping self's as it writes (no copy of the
    // source first): the tangent is copied the same way (mode._copies_within).
    const at::Tensor source_tangent = tangents[1].toTensor();
    op.handle->callBoxed(stack);
    c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
    self_tangent.copy_(source_tangent);
    return torch::jit::toPyObject(stack[0]);
  }
  Values primals(stack.begin(), stack.end());
  {
    c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
    separate_from_self(primals, tangents, self_tangent);
    if (op.original_self) primals[0] = primals[0].toTensor().clone();
  }
  op.handle->callBoxed(stack);  // the op, once: self is updated
  c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
  const Results results = run_kernel(op, primals, tangents, stack);
  const at::Tensor& updated = stack[0].toTensor();
  at::Tensor value = !results.empty() && results[0].isTensor() ? results[0].toTensor()
                                                               : at::Tensor();
  if (self_tangent.defined()) {  // written into self's tangent (_update_self)
    if (!value.defined()) {
      self_tangent.zero_();
    } else if (!value.is_same(self_tangent)) {
      self_tangent.copy_(value);
    }
  } else if (value.defined()) {  // given to self, in self's dtype and layout
    check_shape(op.handle->schema(), value, updated);
    if (value.is_complex()) value = at::real(value);
    if (value.scalar_type() != updated.scalar_type()) value = value.to(updated.scalar_type());
    bool fresh = false;  // an operand's tangent as it is (copy_): stored as a copy
    for (const c10::IValue& tangent : tangents) {
      fresh = fresh || (tangent.isTensor() && root(tangent.toTensor()) == root(value));
    }
    value = batched_by_legacy_vmap(value) ? conform_batched(value, updated, fresh)
                                          : conform_layout(value, updated, fresh);
    py::object laid_out = py::reinterpret_steal<py::object>(THPVariable_Wrap(value));
    set_tangent(py::reinterpret_borrow<py::object>(self), level, laid_out.ptr());
  }
  return torch::jit::toPyObject(stack[0]);
}

py::object update_batched_view(const OpEntry& op, torch::jit::Stack& stack,
                               const at::Tensor& self_tangent, const py::handle& self,
                               const py::handle& level, bool tracking) {
  torch::jit::Stack view_stack(stack.begin(), stack.end());
  view_stack[0] = c10::IValue(self_tangent);
  {
    const FormulaKeys formula = formula_keys();
    c10::impl::ForceDispatchKeyGuard keys(formula.included, formula.excluded);
    op.view_form->callBoxed(view_stack);
  }
  op.handle->callBoxed(stack);
  py::object tangent = torch::jit::toPyObject(view_stack[0]);
  set_tangent(py::reinterpret_borrow<py::object>(self), level, tangent.ptr());
  py::object out = torch::jit::toPyObject(stack[0]);
  if (tracking) remember_output(out, level, false);  // tangents.remember_saved_outputs
  return out;
}

}  // namespace dualgen
