#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/shapes.h"

namespace dualgen::formulas {

void bind_shapes(pybind11::module_& m) {
  m.def(
      "scatter_reduce_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p, int64_t dim,
         const at::Tensor& index, const at::Tensor& src_t,
         const at::Tensor& src_p, const std::string& reduce, bool include_self,
         const at::Tensor& result) {
        return scatter_reduce_tangent(
            self_t, self_p, dim, index, src_t, src_p, reduce, include_self,
            result);
      });
  m.def("resize_tangent", &resize_tangent);
}

}  // namespace dualgen::formulas
