// C++ twins of dualgen.formulas.shapes (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// Tangent of scatter_reduce (sum, mean, amax, amin); linear in self_t, src_t.
// amax/amin share the tangent equally among the elements attaining the result.
at::Tensor scatter_reduce_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, int64_t dim,
    const at::Tensor& index, const at::Tensor& src_t, const at::Tensor& src_p,
    c10::string_view reduce, bool include_self, const at::Tensor& result);

// Tangent of resize_ (from torch's conjugate fallback): self's tangent laid
// out in place over the same memory as self now is (`result`), grown in place
// (the added memory zero) where the resize grows self's.
at::Tensor resize_tangent(const at::Tensor& self_t, const at::Tensor& result);

}  // namespace dualgen::formulas
