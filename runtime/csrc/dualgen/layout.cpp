// Tangents laid out as their primals (layout.h).
#include "dualgen/layout.h"

namespace dualgen {

bool same_geometry(const at::Tensor& tangent, const at::Tensor& primal) {
  if (tangent.sizes() != primal.sizes()) return false;
  if (primal.numel() != 0) {
    if (tangent.storage_offset() != primal.storage_offset()) return false;
    const auto a = tangent.strides(), b = primal.strides(), n = primal.sizes();
    for (size_t i = 0; i < n.size(); ++i) {
      if (a[i] != b[i] && n[i] != 1) return false;
    }
  }
  return tangent.is_conj() == primal.is_conj() && tangent.is_neg() == primal.is_neg();
}

bool same_layout(const at::Tensor& tangent, const at::Tensor& primal) {
  if (!same_geometry(tangent, primal)) return false;
  const auto nbytes = tangent.storage().nbytes(), primal_nbytes = primal.storage().nbytes();
  if (tangent.scalar_type() == primal.scalar_type()) return nbytes == primal_nbytes;
  return nbytes * primal.element_size() == primal_nbytes * tangent.element_size();
}

at::Tensor laid_out_like(const at::Tensor& primal, at::ScalarType dtype) {
  const auto offset = primal.storage_offset();
  const auto length = static_cast<int64_t>(primal.storage().nbytes()) / primal.element_size();
  const bool covers = offset == 0 && length == primal.numel();
  const auto options = primal.options().dtype(dtype);
  if (!covers) {
    return at::zeros({length}, options).as_strided(primal.sizes(), primal.strides(), offset);
  }
  return at::empty_strided(primal.sizes(), primal.strides(), options);
}

at::Tensor conform_layout(const at::Tensor& tangent, const at::Tensor& primal, bool fresh) {
  const bool keep = same_layout(tangent, primal);
  if (keep && !fresh) return tangent;
  const auto dtype = keep ? tangent.scalar_type() : primal.scalar_type();
  return laid_out_like(primal, dtype).copy_(tangent);
}

}  // namespace dualgen
