// Where tangents live (store.h): reading and writing the Python side's store.
#include "dualgen/store.h"

#include "dualgen/saved.h"

namespace dualgen {

Shared* shared = nullptr;
Names* names = nullptr;

namespace {

// The level's saved outputs: the C++ twin, which enter_dual_level gives every
// level entered under the C++ backend (the backend is chosen before the level
// is made); null, with `store` set, for any other store, used through its
// Python methods.
SavedOutputs* saved_of(const py::handle& level, py::object& store) {
  store = level.attr(names->saved);
  return py::isinstance<SavedOutputs>(store) ? store.cast<SavedOutputs*>() : nullptr;
}

// The tangent the level remembered for an output with t's geometry and memory
// (tangents.remembered_tangent): autograd's rebuilt saved outputs have one,
// into `*out` (borrowed: the entries hold it). One that moves to its output's
// node (saved_tangents.SavedTangent) is resolved and, as tangent_of does,
// made t's own (held by t's entries; the Python path's where t has no Python
// object yet); a store of the Python backend's is the Python path's.
Found saved_tangent(PyObject* obj, const at::Tensor& t, const py::handle& level,
                    PyObject** out) {
  py::object store;
  SavedOutputs* saved = saved_of(level, store);
  if (saved == nullptr) {
    py::object wrapped = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
    return store.attr(names->find)(wrapped).is_none() ? Found::None : Found::Slow;
  }
  PyObject* entries = saved->find(t);
  PyObject* value = entries ? PyDict_GetItemWithError(entries, level.ptr()) : nullptr;
  if (value == nullptr || value == shared->no_tangent.ptr()) return Found::None;
  if (!THPVariable_Check(value)) {
    if (obj == nullptr) return Found::Slow;
    py::object resolved = py::reinterpret_borrow<py::object>(value).attr("resolve")();
    if (!THPVariable_Check(resolved.ptr())) return Found::None;  // (it died)
    set_tangent(py::reinterpret_borrow<py::object>(obj), level, resolved.ptr());
    value = resolved.ptr();
  }
  *out = value;
  return Found::Tangent;
}

}  // namespace

// One with a tangent entry at `level` is remembered by the level's saved
// outputs (under its geometry, while its memory lives, not holding it).
void remember_output(const py::handle& out, const py::handle& level, bool weakly) {
  PyObject** dict = _PyObject_GetDictPtr(out.ptr());
  if (dict == nullptr || *dict == nullptr) return;
  PyObject* entries = PyDict_GetItemWithError(*dict, shared->tangents.ptr());
  PyObject* tangent = entries ? PyDict_GetItemWithError(entries, level.ptr()) : nullptr;
  if (tangent == nullptr) return;
  const at::Tensor& t = THPVariable_Unpack(out.ptr());
  if (t._is_zerotensor()) return;
  py::object kept = py::reinterpret_borrow<py::object>(entries);
  if (weakly && THPVariable_Check(tangent) && THPVariable_Unpack(tangent).requires_grad()) {
    static py::object* saved_form = nullptr;
    if (saved_form == nullptr) {
      saved_form = new py::object(
          py::module_::import("dualgen.saved_tangents").attr("saved_form"));
    }
    kept = (*saved_form)(kept, level, out);
  }
  py::object store;
  if (SavedOutputs* saved = saved_of(level, store)) {
    saved->remember(t, kept);
  } else {
    store.attr(names->remember)(out, kept);
  }
}

Found tangent_at(PyObject* obj, const at::Tensor& t, const py::handle& level,
                 PyObject** out, int depth) {
  PyObject** dict = obj ? _PyObject_GetDictPtr(obj) : nullptr;
  PyObject* own = (dict && *dict) ? *dict : nullptr;
  PyObject* entries = own ? PyDict_GetItemWithError(own, shared->tangents.ptr()) : nullptr;
  PyObject* value = entries ? PyDict_GetItemWithError(entries, level.ptr()) : nullptr;
  if (value == shared->no_tangent.ptr()) return Found::None;
  if (value != nullptr) {
    *out = value;
    return Found::Tangent;
  }
  PyObject* base = own ? PyDict_GetItemWithError(own, shared->forward_base.ptr()) : nullptr;
  if (base != nullptr || t.is_view()) {
    if (depth > 8 || (base != nullptr && !THPVariable_Check(base))) return Found::Slow;
    PyObject* ignored = nullptr;
    const at::Tensor base_tensor = base != nullptr ? THPVariable_Unpack(base) : at::Tensor(t._base());
    const Found found = tangent_at(base != nullptr ? base : python_of(base_tensor), base_tensor,
                                   level, &ignored, depth + 1);
    return found == Found::None ? Found::None : Found::Slow;
  }
  // A rebuilt saved output has a grad_fn; `output.detach().requires_grad_()`,
  // a leaf with no tangent, has not.
  if (t.grad_fn() && !t._is_zerotensor()) return saved_tangent(obj, t, level, out);
  return Found::None;
}

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

void drop_entries(const py::handle& level) {
  py::list tensors = level.attr(names->tensors);
  for (const py::handle& ref : tensors) {
    py::object t = py::reinterpret_borrow<py::object>(PyWeakref_GetObject(ref.ptr()));
    PyObject** dict = t.is_none() ? nullptr : _PyObject_GetDictPtr(t.ptr());
    if (dict == nullptr || *dict == nullptr) continue;
    py::object keep = py::reinterpret_borrow<py::object>(*dict);
    PyObject* found = PyDict_GetItemWithError(keep.ptr(), shared->tangents.ptr());
    if (found == nullptr) continue;
    py::object entries = py::reinterpret_borrow<py::object>(found);
    if (PyDict_DelItem(entries.ptr(), level.ptr()) < 0) PyErr_Clear();  // none there
    if (PyDict_Size(entries.ptr()) == 0 &&
        PyDict_DelItem(keep.ptr(), shared->tangents.ptr()) < 0) {
      PyErr_Clear();
    }
  }
}

// levels.note_view: a view of a tensor with tangents of its own (or of a
// make_dual result or unpack_dual primal, levels.FORWARD_ROOT) follows that
// tensor's tangent, not its memory's owner's.
void note_view(const py::object& view, const py::handle& source) {
  if (!THPVariable_Check(source.ptr())) return;
  static py::object* root_key = nullptr;
  if (root_key == nullptr) {
    root_key = new py::object(py::module_::import("dualgen.levels").attr("FORWARD_ROOT"));
  }
  PyObject** dict = _PyObject_GetDictPtr(source.ptr());
  PyObject* base = nullptr;
  bool own = false;
  if (dict != nullptr && *dict != nullptr) {
    base = PyDict_GetItemWithError(*dict, shared->forward_base.ptr());
    own = PyDict_GetItemWithError(*dict, shared->tangents.ptr()) != nullptr ||
          PyDict_GetItemWithError(*dict, root_key->ptr()) != nullptr;
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

}  // namespace dualgen
