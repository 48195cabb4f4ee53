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

std::vector<int64_t> dim_range(int64_t lo, int64_t hi) {
  std::vector<int64_t> dims;
  for (int64_t d = lo; d < hi; ++d) {
    dims.push_back(d);
  }
  return dims;
}

std::vector<int64_t> concat_ints(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> joined(a.begin(), a.end());
  joined.insert(joined.end(), b.begin(), b.end());
  return joined;
}

std::vector<int64_t> channel_shape(int64_t ndim, int64_t axis) {
  TORCH_CHECK(-ndim <= axis && axis < ndim, "list assignment index out of range");
  std::vector<int64_t> shape(ndim, 1);
  shape[axis < 0 ? axis + ndim : axis] = -1;  // Python's negative index
  return shape;
}

std::vector<int64_t> int_list(const at::Tensor& t) {
  const auto host = t.reshape(-1).to(at::kCPU, at::kLong).contiguous();
  const int64_t* values = host.data_ptr<int64_t>();
  return std::vector<int64_t>(values, values + host.numel());
}

bool refuse_dropout(double dropout_p, c10::string_view op) {
  TORCH_CHECK(dropout_p == 0.0, "dualgen: ", op, " with dropout_p=", dropout_p,
              " draws random numbers inside the kernel: it has no derivative; only "
              "dropout_p=0 is differentiable");
  return true;
}

at::Tensor no_derivative(
    c10::string_view op, c10::string_view argument, c10::string_view value) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op, ": no derivative for ", argument, "='", value, "'");
  return at::Tensor();
}

at::Tensor lengths_mask(at::IntArrayRef lengths, int64_t steps, const at::Tensor& like) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(like.device());
  return at::arange(steps, options).unsqueeze(1) < at::tensor(lengths, options).unsqueeze(0);
}

at::Tensor lengths_mask(const at::Tensor& lengths, int64_t steps, const at::Tensor& like) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(like.device());
  return at::arange(steps, options).unsqueeze(1) < lengths.to(like.device()).unsqueeze(0);
}

}  // namespace dualgen::formulas
