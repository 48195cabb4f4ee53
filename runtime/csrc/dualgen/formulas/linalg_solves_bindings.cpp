#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/linalg_solves.h"

namespace dualgen::formulas {

// Every twin under its Python name, with the Python parameter names (so that
// keyword calls work as on the Python helpers). None of these helpers accepts
// None for a tensor in Python, so neither do the bindings.
void bind_linalg_solves(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("triangular_part", &triangular_part, py::arg("t"), py::arg("upper"),
        py::arg("unitriangular") = false);
  m.def("side_matmul", &side_matmul, py::arg("m"), py::arg("x"),
        py::arg("left"));
  m.def("linalg_solve_tangent", &linalg_solve_tangent, py::arg("A_t"),
        py::arg("B_t"), py::arg("A"), py::arg("B"), py::arg("result"),
        py::arg("left"));
  m.def("triangular_solve_tangent", &triangular_solve_tangent, py::arg("B_t"),
        py::arg("A_t"), py::arg("A"), py::arg("solution"), py::arg("upper"),
        py::arg("transpose"), py::arg("unitri"));
  m.def("cholesky_tangent", &cholesky_tangent, py::arg("A_t"), py::arg("L"),
        py::arg("upper"));
  m.def("cholesky_solve_tangent", &cholesky_solve_tangent, py::arg("B_t"),
        py::arg("L_t"), py::arg("L"), py::arg("result"), py::arg("upper"));
  m.def("cholesky_inverse_tangent", &cholesky_inverse_tangent, py::arg("L_t"),
        py::arg("L"), py::arg("result"), py::arg("upper"));
  m.def("det_tangent", &det_tangent, py::arg("A_t"), py::arg("A"),
        py::arg("det"));
  m.def(
      "slogdet_tangents",
      [](const at::Tensor& A_t, const at::Tensor& A, const at::Tensor& sign) {
        auto r = slogdet_tangents(A_t, A, sign);
        return py::make_tuple(r[0], r[1]);
      },
      py::arg("A_t"), py::arg("A"), py::arg("sign"));
  m.def(
      "lu_tangents",
      [](const at::Tensor& A_t, const at::Tensor& P, const at::Tensor& L,
         const at::Tensor& U) {
        auto r = lu_tangents(A_t, P, L, U);
        return py::make_tuple(r[0], r[1]);
      },
      py::arg("A_t"), py::arg("P"), py::arg("L"), py::arg("U"));
  m.def(
      "lu_unpack_tangents",
      [](const at::Tensor& LU_t) {
        auto r = lu_unpack_tangents(LU_t);
        return py::make_tuple(r[0], r[1]);
      },
      py::arg("LU_t"));
  m.def("lu_factor_tangent", &lu_factor_tangent, py::arg("A_t"),
        py::arg("LU"), py::arg("pivots"));
  m.def("det_lu_tangent", &det_lu_tangent, py::arg("A_t"), py::arg("A"),
        py::arg("LU"), py::arg("pivots"));
  m.def("lu_solve_tangent", &lu_solve_tangent, py::arg("LU_t"), py::arg("B_t"),
        py::arg("LU"), py::arg("pivots"), py::arg("result"), py::arg("left"),
        py::arg("adjoint"));
  m.def("matrix_exp_differential", &matrix_exp_differential, py::arg("A"),
        py::arg("E"), py::arg("adjoint"));
  m.def("householder_product_tangent", &householder_product_tangent,
        py::arg("input_t"), py::arg("tau_t"), py::arg("input"),
        py::arg("tau"));
}

}  // namespace dualgen::formulas
