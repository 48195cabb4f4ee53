#include "formulas.h"  // generated from twins.yaml

#include <algorithm>

namespace dualgen::formulas {

// Tangents of _foreach_norm: each tensor's vector norm tangent over all its
// elements (vector_norm_tangent: helpers/reductions.yaml).
TensorList foreach_norm_tangents(
    const TensorList& self_t,
    const TensorList& self_p,
    const std::optional<c10::Scalar>& ord,
    const TensorList& result) {
  TensorList tangents;
  const size_t n = std::min({self_t.size(), self_p.size(), result.size()});
  tangents.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    tangents.push_back(vector_norm_tangent(
        self_t[i], self_p[i], ord, std::nullopt, false, result[i]));
  }
  return tangents;
}

}  // namespace dualgen::formulas
