#include "formulas.h"  // generated from twins.yaml

namespace dualgen::formulas {

namespace {

// Where `index` writes into `self` (bool).
at::Tensor scatter_touched(
    const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor hit = at::zeros_like(self, self.options().dtype(at::kBool));
  return hit.scatter(dim, index, true);
}

// The part of `src` that scatter reads (its leading corner shaped like `index`).
at::Tensor src_read(at::Tensor src, const at::Tensor& index) {
  for (int64_t d = 0; d < index.dim(); ++d) {
    src = src.narrow(d, 0, index.size(d));
  }
  return src;
}

// For amax/amin: the weight of each self and src element in the result (1/N
// for each of the N elements attaining it, 0 otherwise).
std::pair<at::Tensor, at::Tensor> extreme_weights(
    const at::Tensor& self, int64_t dim, const at::Tensor& index,
    const at::Tensor& src, bool include_self, const at::Tensor& result) {
  at::Tensor touched = scatter_touched(self, dim, index);
  at::Tensor self_hit = self == result;
  if (!include_self) {
    self_hit = self_hit & ~touched;
  }
  at::Tensor src_hit = src_read(src, index) == result.gather(dim, index);
  at::Tensor count = self_hit.to(self.scalar_type())
                         .scatter_add(dim, index, src_hit.to(self.scalar_type()));
  count = count.masked_fill(count == 0, 1);
  return {self_hit / count, src_hit / count.gather(dim, index)};
}

}  // namespace

at::Tensor scatter_reduce_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, int64_t dim,
    const at::Tensor& index, const at::Tensor& src_t, const at::Tensor& src_p,
    c10::string_view reduce, bool include_self, const at::Tensor& result) {
  if (reduce == "sum" || reduce == "mean") {
    return self_t.scatter_reduce(dim, index, src_t, reduce, include_self);
  }
  if (reduce == "amax" || reduce == "amin") {
    auto [self_w, src_w] =
        extreme_weights(self_p, dim, index, src_p, include_self, result);
    // The weights in each tangent's dtype, as native's (masks keep it).
    const at::Tensor self_term = self_t * self_w.to(self_t.scalar_type());
    const at::Tensor src_term =
        src_read(src_t, index) * src_w.to(src_t.scalar_type());
    return self_term.scatter_add(dim, index,
                                 src_term.to(self_term.scalar_type()));
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "scatter_reduce: no derivative for reduce='",
      std::string(reduce.data(), reduce.size()), "'");
}

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
    // memory it adds zero.
    at::Tensor memory = at::empty({0}, self_t.options()).set_(self_t.storage());
    memory.resize_({needed});
    memory.narrow(0, length, needed - length).zero_();
  }
  return self_t.as_strided_(result.sizes(), result.strides(),
                            self_t.storage_offset());
}

}  // namespace dualgen::formulas
