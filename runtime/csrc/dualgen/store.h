// Where tangents live, as the Python side keeps them (levels.py, tangents.py):
// a tensor's `__dict__` maps the TANGENTS key to {Level: tangent}; a view made
// of a tensor with tangents of its own notes that tensor under FORWARD_BASE; a
// Level lists weak references to the tensors with entries at it. The hot path
// reads and writes this one store, so the Python code sees what it does.
#pragma once

#include <torch/csrc/autograd/python_variable.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

namespace dualgen {

namespace py = pybind11;

// What the Python side hands over once (`bind_state`).
struct Shared {
  py::object state;        // levels.STATE (thread-local)
  py::object tangents;     // the __dict__ key of a tensor's tangents
  py::object no_tangent;   // the marker of an explicit "no tangent"
  py::object forward_base; // the __dict__ key of a view's forward base
  py::object slow;         // returned when the Python path must handle the op
  py::object describe;     // op -> None or what the hot path needs (fast.describe)
  py::object tensor_type;  // torch.Tensor
  py::object detach;       // torch.ops.aten.detach.default
  py::object no_torch_function;  // torch._C._disabled_torch_function_impl
  py::object sweep_tensors;      // levels.sweep_tensors
};
extern Shared* shared;

// Attribute names, made once: the hot path reads several per op.
struct Names {
  py::str cap{"cap"}, defer_next{"defer_next"}, subclass_op{"subclass_op"},
      levels{"levels"}, user_exclude{"user_exclude"}, raw_repr{"raw_repr"},
      tensors{"tensors"}, sweep_tensors_at{"sweep_tensors_at"}, saved{"saved"},
      remember{"remember"}, find{"find"},
      saved_to_move{"saved_to_move"};
};
extern Names* names;

enum class Found { None, Tangent, Slow };

// t's Python object (borrowed), or null if it has none: then it has no entries
// in the store, which lives in Python objects' __dict__.
inline PyObject* python_of(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
}

// t's tangent at `level`, as tangents.tangent_of finds it: its own entry
// (`*out`); else, for a view, none if its forward base has none (a base with
// one: Slow, the Python path derives the view's); else, for a rebuilt saved
// output, the tangent its level remembered (then t's own; Slow where t has no
// Python object to hold it). `obj`: t's Python object, or null where it has
// none.
Found tangent_at(PyObject* obj, const at::Tensor& t, const py::handle& level,
                 PyObject** out, int depth = 0);

// levels.set_tangent: `value` (a tensor, or the no-tangent marker) as the
// tensor's entry at `level`, the level noting the tensor on its first entry.
void set_tangent(const py::object& tensor, const py::handle& level, PyObject* value);

// levels.clear_level's loop: every tensor the level gave entries loses its
// entry at the level (and its entries dict when that was the last).
void drop_entries(const py::handle& level);

// levels.note_view: a view of a tensor with tangents of its own follows that
// tensor's tangent, not its memory's owner's.
void note_view(const py::object& view, const py::handle& source);

// tangents.remember_saved_outputs for one output; `weakly`: a tangent with a
// graph of its own is kept in its saved form (saved_tangents.saved_form).
void remember_output(const py::handle& out, const py::handle& level, bool weakly);

// A real, unnegated, strided tensor with storage (not nested: a nested tensor's
// layout is strided too): what the hot path computes with.
inline bool plain(const at::Tensor& t) {
  return !t.is_complex() && !t.is_neg() && t.has_storage() && t.layout() == at::kStrided &&
         !t.is_nested();
}

// The tensor whose memory t views (t itself if it is no view).
inline const c10::TensorImpl* root(const at::Tensor& t) {
  return t.is_view() ? t._base().unsafeGetTensorImpl() : t.unsafeGetTensorImpl();
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

}  // namespace dualgen
