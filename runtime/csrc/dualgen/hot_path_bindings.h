// The per-op hot path (hot_path.cpp), bound into the extension module.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

namespace dualgen {

void bind_hot_path(pybind11::module_& m);
// The front kernel (hot_path_front.cpp), bound into the extension module.
void bind_front(pybind11::module_& m);
// Legacy vmap's element-wise batching rule (batching.cpp), bound likewise.
void bind_batching(pybind11::module_& m);
// Drop what the hot path knows of each op (rules or kernel tables changed).
void forget();

}  // namespace dualgen
