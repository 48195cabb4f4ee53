#include "formulas.h"  // generated from twins.yaml

namespace dualgen::formulas {

at::Tensor resize_tangent(const at::Tensor& self_t, const at::Tensor& result) {
  int64_t extent = 1;
  for (int64_t d = 0; d < result.dim(); ++d) {
    extent += (result.size(d) - 1) * result.stride(d);
  }
  const int64_t needed =
      result.numel() == 0 ? 0 : self_t.storage_offset() + extent;
  const int64_t length =
      static_cast<int64_t>(self_t.storage().nbytes()) /
      static_cast<int64_t>(self_t.element_size());
  if (needed > length) {
    // The tangent's memory grows in place (its views keep sharing it), the
    // memory it adds zero; through a view of self_t, so that an enclosing
    // level grows self_t's own tangent alike (nested levels).
    at::Tensor memory = self_t.as_strided({length}, {1}, 0);
    memory.resize_({needed});
    memory.narrow(0, length, needed - length).zero_();
  }
  return self_t.as_strided_(result.sizes(), result.strides(),
                            self_t.storage_offset());
}

}  // namespace dualgen::formulas
