#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/linalg_decompositions.h"

namespace dualgen::formulas {

void bind_linalg_decompositions(pybind11::module_& m) {
  m.def("svd_tangents", &svd_tangents);
  m.def("eigh_tangents", &eigh_tangents);
  m.def("hermitian_sqrt_differential", &hermitian_sqrt_differential);
  m.def("eig_tangents", &eig_tangents);
  m.def(
      "qr_tangents",
      [](const at::Tensor& A_t,
         const at::Tensor& Q,
         const at::Tensor& R,
         const std::string& mode) { return qr_tangents(A_t, Q, R, mode); });
  m.def("pinv_tangent", &pinv_tangent);
  m.def("lstsq_self_tangent", &lstsq_self_tangent);
  m.def("lstsq_b_tangent", &lstsq_b_tangent);
  m.def("lstsq_residuals_tangent", &lstsq_residuals_tangent);
}

}  // namespace dualgen::formulas
