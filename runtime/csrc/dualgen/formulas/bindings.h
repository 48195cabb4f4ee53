// Each formulas module binds its twins into the extension's `formulas`
// submodule (for the tests that hold each twin to its Python helper).
#pragma once

#include <torch/extension.h>

namespace dualgen::formulas {

void bind_elementwise(pybind11::module_& m);
void bind_reductions(pybind11::module_& m);
void bind_nn(pybind11::module_& m);
void bind_shapes(pybind11::module_& m);
void bind_linalg_decompositions(pybind11::module_& m);
void bind_linalg_solves(pybind11::module_& m);
void bind_backward_ops(pybind11::module_& m);

}  // namespace dualgen::formulas
