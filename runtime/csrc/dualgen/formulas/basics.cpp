#include "formulas.h"  // generated from twins.yaml

#include <algorithm>

namespace dualgen::formulas {

std::vector<int64_t> reduction_dims(at::OptionalIntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> dims;
  if (!dim.has_value() || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) {
      dims.push_back(d);
    }
    return dims;
  }
  for (int64_t d : *dim) {
    // Python's `d % ndim`, never negative.
    dims.push_back(ndim ? ((d % ndim) + ndim) % ndim : 0);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

std::vector<int64_t> reduction_dims(std::optional<int64_t> dim, int64_t ndim) {
  if (!dim.has_value()) {
    return reduction_dims(at::OptionalIntArrayRef(), ndim);
  }
  return reduction_dims(at::IntArrayRef{*dim}, ndim);
}

}  // namespace dualgen::formulas
