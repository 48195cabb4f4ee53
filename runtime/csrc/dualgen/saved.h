// The outputs autograd may save, per level (levels.SavedOutputs is the Python
// twin; a level holds one or the other by the backend it was entered under).
// Autograd rebuilds a saved output as a new tensor sharing its storage, so the
// output's tangent entries are found again by where and how its elements lie
// (first element's address, sizes, strides, dtype), and only while its storage
// lives: a weak reference to the storage's Python object (which lives exactly
// as long as the storage) drops the entry when the memory goes.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include <unordered_map>
#include <vector>

namespace dualgen {

namespace py = pybind11;

struct Geometry {
  const void* first;  // the first element's address (the storage offset in it)
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;

  explicit Geometry(const at::Tensor& t);
  bool operator==(const Geometry& other) const {
    return first == other.first && dtype == other.dtype && sizes == other.sizes &&
           strides == other.strides;
  }
};

struct GeometryHash {
  size_t operator()(const Geometry& g) const;
};

class SavedOutputs {
 public:
  SavedOutputs() = default;
  ~SavedOutputs();
  SavedOutputs(const SavedOutputs&) = delete;
  SavedOutputs& operator=(const SavedOutputs&) = delete;

  // Remember `entries` (the output's tangent dict) under t's geometry.
  void remember(const at::Tensor& t, const py::handle& entries);
  // The entries remembered for a tensor with t's geometry and storage (borrowed),
  // or null.
  PyObject* find(const at::Tensor& t) const;
  void clear();
  size_t size() const { return saved_.size(); }
  // The callback of the weak reference `held`: its memory is gone.
  static void freed(PyObject* held);

 private:
  struct Entry {
    py::object held;     // weak reference to the storage's Python object
    py::object entries;  // the output's tangent entries
  };
  std::unordered_map<Geometry, Entry, GeometryHash> saved_;
};

void bind_saved_outputs(py::module_& m);

}  // namespace dualgen
