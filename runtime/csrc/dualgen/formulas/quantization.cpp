#include "formulas.h"  // generated from twins.yaml

#include <vector>

namespace dualgen::formulas {

namespace {

struct FakeQuantPartials {
  at::Tensor inside, numerator, weight, d_zero_point;
};

// As the Python helper: native's kernel's arithmetic, in self's dtype.
FakeQuantPartials fake_quant_partials(
    const at::Tensor& self, const at::Tensor& scale, const at::Tensor& zero_point,
    int64_t quant_min, int64_t quant_max) {
  at::Tensor s = scale.to(self.scalar_type());
  at::Tensor z = zero_point.to(self.scalar_type());
  at::Tensor inv = s.reciprocal();
  at::Tensor xq = at::round(at::addcmul(z, self, inv));
  at::Tensor inside = (xq >= quant_min).logical_and(xq <= quant_max);
  at::Tensor numerator = at::where(
      inside, at::addcmul(-self, xq.clamp(quant_min, quant_max) - z, s),
      at::where(xq < quant_min, at::rsub(z, quant_min), at::rsub(z, quant_max)));
  at::Tensor weight = at::where(inside, inv, at::ones_like(inv));
  at::Tensor d_zero_point = at::where(inside, at::zeros_like(self), -s);
  return {inside, numerator, weight, d_zero_point};
}

std::vector<int64_t> fake_quant_channel_shape(const at::Tensor& self, int64_t axis) {
  std::vector<int64_t> shape(self.dim(), 1);
  shape[axis] = -1;
  return shape;
}

}  // namespace

at::Tensor fake_quantize_learnable_per_tensor_tangent(
    const at::Tensor& self_t, const at::Tensor& scale_t,
    const at::Tensor& zero_point_t, const at::Tensor& self, const at::Tensor& scale,
    const at::Tensor& zero_point, int64_t quant_min, int64_t quant_max,
    double grad_factor) {
  at::Tensor s = scale.reshape(-1).select(0, 0);
  at::Tensor z =
      at::clamp(zero_point.reshape(-1).select(0, 0) + 0.5, quant_min, quant_max)
          .trunc();
  FakeQuantPartials p = fake_quant_partials(self, s, z, quant_min, quant_max);
  at::Tensor d_scale = p.numerator * p.weight;
  at::Tensor ds = scale_t.reshape(-1).select(0, 0).to(self.scalar_type());
  at::Tensor dz = zero_point_t.reshape(-1).select(0, 0).to(self.scalar_type());
  return self_t * p.inside + (d_scale * ds + p.d_zero_point * dz) * grad_factor;
}

at::Tensor fake_quantize_learnable_per_channel_tangent(
    const at::Tensor& self_t, const at::Tensor& scale_t,
    const at::Tensor& zero_point_t, const at::Tensor& self, const at::Tensor& scale,
    const at::Tensor& zero_point, int64_t axis, int64_t quant_min, int64_t quant_max,
    double grad_factor) {
  const std::vector<int64_t> shape = fake_quant_channel_shape(self, axis);
  at::Tensor z = at::round(zero_point).clamp(quant_min, quant_max);
  FakeQuantPartials p = fake_quant_partials(
      self, scale.reshape(shape), z.reshape(shape), quant_min, quant_max);
  at::Tensor d_scale = p.numerator * p.weight;
  at::Tensor ds = scale_t.reshape(shape).to(self.scalar_type());
  at::Tensor dz = zero_point_t.reshape(shape).to(self.scalar_type());
  return self_t * p.inside + (d_scale * ds + p.d_zero_point * dz) * grad_factor;
}

}  // namespace dualgen::formulas
