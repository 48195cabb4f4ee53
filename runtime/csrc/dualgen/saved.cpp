// Saved outputs' tangents, found again by geometry (saved.h).
#include "dualgen/saved.h"

#include <torch/csrc/Storage.h>

namespace dualgen {

namespace {

// A nested tensor's components' sizes or strides, one row each, after a -1 (no
// plain tensor's sizes start so).
std::vector<int64_t> nested_rows(const at::Tensor& rows) {
  const at::Tensor flat = rows.contiguous();
  std::vector<int64_t> out{-1};
  out.insert(out.end(), flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  return out;
}

}  // namespace

Geometry::Geometry(const at::Tensor& t) : first(t.data_ptr()), dtype(t.scalar_type()) {
  if (t.is_nested()) {  // (no single shape: each component's)
    sizes = nested_rows(t._nested_tensor_size());
    strides = nested_rows(t._nested_tensor_strides());
    return;
  }
  sizes.assign(t.sizes().begin(), t.sizes().end());
  strides.assign(t.strides().begin(), t.strides().end());
}

size_t GeometryHash::operator()(const Geometry& g) const {
  size_t h = std::hash<const void*>()(g.first) ^ static_cast<size_t>(g.dtype);
  for (int64_t s : g.sizes) h = h * 31 + static_cast<size_t>(s);
  for (int64_t s : g.strides) h = h * 37 + static_cast<size_t>(s);
  return h;
}

namespace {

// Every store's weak references, each with its store and key: one callback
// serves them all (a callable made per store would cost each level entered).
// A store owns the weak references it makes, and only it, so a callback comes
// only while its store lives and knows it.
struct Held {
  SavedOutputs* store;
  Geometry key;
};
std::unordered_map<PyObject*, Held>& held_by() {
  static auto* held = new std::unordered_map<PyObject*, Held>();
  return *held;
}

PyObject* on_freed() {
  static PyObject* callback = [] {
    static PyMethodDef def{
        "saved_output_freed",
        [](PyObject*, PyObject* held) -> PyObject* {
          SavedOutputs::freed(held);
          Py_RETURN_NONE;
        },
        METH_O, nullptr};
    return PyCFunction_New(&def, nullptr);
  }();
  return callback;
}

}  // namespace

SavedOutputs::~SavedOutputs() { clear(); }

void SavedOutputs::remember(const at::Tensor& t, const py::handle& entries) {
  Geometry key(t);
  py::object memory = py::reinterpret_steal<py::object>(THPStorage_Wrap(t.storage()));
  py::object held =
      py::reinterpret_steal<py::object>(PyWeakref_NewRef(memory.ptr(), on_freed()));
  if (!held) throw py::error_already_set();
  Entry replaced;  // released last: what it frees may call back into a store
  held_by().emplace(held.ptr(), Held{this, key});
  auto found = saved_.find(key);
  if (found != saved_.end()) {
    held_by().erase(found->second.held.ptr());
    replaced = std::move(found->second);
    found->second = Entry{held, py::reinterpret_borrow<py::object>(entries)};
  } else {
    saved_.emplace(std::move(key), Entry{held, py::reinterpret_borrow<py::object>(entries)});
  }
}

PyObject* SavedOutputs::find(const at::Tensor& t) const {
  if (saved_.empty() || !t.has_storage()) return nullptr;
  auto found = saved_.find(Geometry(t));
  if (found == saved_.end()) return nullptr;
  PyObject* memory = PyWeakref_GetObject(found->second.held.ptr());
  PyObject* own = t.storage().unsafeGetStorageImpl()->pyobj_slot()->load_pyobj();
  return memory != Py_None && memory == own ? found->second.entries.ptr() : nullptr;
}

void SavedOutputs::freed(PyObject* held) {
  auto owner = held_by().find(held);
  if (owner == held_by().end()) return;
  SavedOutputs* store = owner->second.store;
  Entry gone;
  auto found = store->saved_.find(owner->second.key);
  if (found != store->saved_.end() && found->second.held.ptr() == held) {
    gone = std::move(found->second);
    store->saved_.erase(found);
  }
  held_by().erase(owner);
}  // `gone` released here, the stores consistent

void SavedOutputs::clear() {
  auto saved = std::move(saved_);
  saved_.clear();
  for (const auto& item : saved) held_by().erase(item.second.held.ptr());
}  // the entries go here, the store already empty

void bind_saved_outputs(py::module_& m) {
  py::class_<SavedOutputs>(m, "SavedOutputs",
                           "levels.SavedOutputs, kept in C++ for the hot path")
      .def(py::init<>())
      .def("remember", [](SavedOutputs& s, const at::Tensor& t,
                          py::object entries) { s.remember(t, entries); })
      .def("find",
           [](const SavedOutputs& s, const at::Tensor& t) -> py::object {
             PyObject* entries = s.find(t);
             return entries ? py::reinterpret_borrow<py::object>(entries) : py::none();
           })
      .def("clear", &SavedOutputs::clear)
      .def("__len__", &SavedOutputs::size);
}

}  // namespace dualgen
