#include "formulas.h"  // generated from twins.yaml

#include <algorithm>
#include <cmath>
#include <limits>

namespace dualgen::formulas {

namespace {

// Python's `d % n` (never negative for n > 0).
int64_t py_mod(int64_t d, int64_t n) {
  return ((d % n) + n) % n;
}

// Python's _dims: the dims a reduction over `dim` covers (absent or empty: all),
// wrapped and sorted; 0s for a 0-d input.
std::vector<int64_t> dims_of(at::OptionalIntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> dims;
  if (!dim.has_value() || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) {
      dims.push_back(d);
    }
    return dims;
  }
  for (int64_t d : *dim) {
    dims.push_back(ndim ? py_mod(d, ndim) : 0);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

// Python's _reduce_dims: the dims a reduction sums, none for a 0-d input.
std::vector<int64_t> reduce_dims(
    at::OptionalIntArrayRef dim, const at::Tensor& like) {
  return like.dim() ? dims_of(dim, like.dim()) : std::vector<int64_t>{};
}

// Python's expand_reduced: a reduction's output broadcast back to `like`.
at::Tensor expand_reduced_to(
    const at::Tensor& grad,
    const at::Tensor& like,
    at::OptionalIntArrayRef dim,
    bool keepdim) {
  at::Tensor g = grad;
  if (!keepdim && like.dim() > 0) {
    for (int64_t d : dims_of(dim, like.dim())) {
      g = g.unsqueeze(d);
    }
  }
  return g.expand(like.sizes());
}

// Python's reduced_numel: how many elements a reduction over `dim` covers.
int64_t numel_reduced(const at::Tensor& like, at::OptionalIntArrayRef dim) {
  int64_t count = 1;
  for (int64_t d : dims_of(dim, like.dim())) {
    count *= like.dim() ? like.size(d) : 1;
  }
  return count;
}

// Python's _sum_reduced: `t` summed over `dim` of `like` (0-d like: a copy,
// or the full sum of a broadcast `t`).
at::Tensor sum_reduced(
    const at::Tensor& t,
    const at::Tensor& like,
    at::OptionalIntArrayRef dim,
    bool keepdim) {
  std::vector<int64_t> dims = reduce_dims(dim, like);
  if (dims.empty()) {
    return t.dim() == like.dim() ? t.clone() : t.sum();
  }
  return t.sum(dims, keepdim);
}

// num / den, 0 where den is 0.
at::Tensor masked_div(const at::Tensor& num, const at::Tensor& den) {
  return at::where(
      at::eq(den, 0), 0.0, num / at::where(at::eq(den, 0), 1.0, den));
}

// d ||self||_ord / d self, shaped like self (Python's _vector_norm_scaled): 0
// where the norm is 0; ties of the inf-norms share equally.
at::Tensor vector_norm_scaled(
    const at::Tensor& x,
    const std::optional<c10::Scalar>& ord,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result) {
  const double p = ord.has_value() ? ord->toDouble() : 2.0;
  const at::ScalarType real = c10::toRealValueType(x.scalar_type());
  at::Tensor norm = expand_reduced_to(result.to(real), x, dim, keepdim);
  if (p == 0.0) {
    return at::zeros_like(x);
  }
  if (p == 1.0) {
    return x.sgn();
  }
  if (p == 2.0) {
    return masked_div(x, norm);
  }
  if (std::isinf(p)) {
    at::Tensor mask = at::bitwise_or(
                          at::eq(x.abs(), norm),
                          at::bitwise_and(x.isnan(), norm.isnan()))
                          .to(real);
    at::Tensor count =
        expand_reduced_to(sum_reduced(mask, x, dim, true), x, dim, true);
    return x.sgn() * mask / count;
  }
  at::Tensor scaled;
  if (p < 2.0) {
    scaled = x.sgn() * at::where(at::eq(x, 0), 0.0, x.abs().pow(p - 1));
  } else {
    scaled = x * x.abs().pow(p - 2);
  }
  return scaled * masked_div(at::ones_like(norm), norm.pow(p - 1));
}

// Python's _var_dof: the divisor of var (reduced count - correction), a 0-d
// tensor of like's real dtype.
at::Tensor var_dof(
    const at::Tensor& like,
    at::OptionalIntArrayRef dim,
    const std::optional<c10::Scalar>& correction) {
  const auto options =
      at::TensorOptions().dtype(c10::toRealValueType(like.scalar_type()));
  const int64_t n = numel_reduced(like, dim);
  if (correction.has_value() && correction->isFloatingPoint()) {
    return at::scalar_tensor(
        static_cast<double>(n) - correction->toDouble(), options);
  }
  const int64_t c = correction.has_value() ? correction->toLong() : 1;
  return at::scalar_tensor(n - c, options);
}

// Python's logsumexp_weights: exp(self - result), shaped like self.
at::Tensor logsumexp_weights_of(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result) {
  return (self - expand_reduced_to(result, self, dim, keepdim)).exp();
}

// Python's _scan_partials: M[..., k, i] = d scan(x)_i / d x_k along `dim`
// (moved last), 0 for k > i.
at::Tensor scan_partials(
    const at::Tensor& self, int64_t dim, c10::string_view kind) {
  const at::Tensor x = self.movedim(dim, -1);
  const int64_t n = x.size(-1);
  const auto bools = at::TensorOptions().dtype(at::kBool).device(x.device());
  const at::Tensor upper = at::ones({n, n}, bools).triu();
  if (kind == "cumprod") {
    const at::Tensor eye = at::eye(n, bools);
    const at::Tensor rows =
        at::where(eye, at::ones_like(x).unsqueeze(-2), x.unsqueeze(-2));
    return at::where(upper, rows.cumprod(-1), 0.0);
  }
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor result = x.logcumsumexp(-1);
  at::Tensor diff = x.unsqueeze(-1) - result.unsqueeze(-2);
  diff = at::where(upper, diff, -inf);
  const at::Tensor both_inf = at::bitwise_and(
      at::eq(at::real(x.unsqueeze(-1)), -inf),
      at::eq(at::real(result.unsqueeze(-2)), -inf));
  return at::where(
      at::bitwise_and(upper, at::bitwise_not(both_inf)), diff.exp(), 0.0);
}

// Python's _prod_others: for each element, the product of the others in its
// reduction (over `dim`, absent for all), exact with zeros.
at::Tensor prod_others(const at::Tensor& self, std::optional<int64_t> dim) {
  if (self.dim() == 0) {
    return at::ones_like(self);
  }
  if (!dim.has_value()) {
    return prod_others(self.reshape(-1), 0).reshape(self.sizes());
  }
  const at::Tensor x = self.movedim(*dim, -1);
  const at::Tensor ones = at::ones_like(x.slice(-1, 0, 1));
  const at::Tensor before = at::cat({ones, x.slice(-1, 0, -1)}, -1).cumprod(-1);
  const at::Tensor after = at::cat({x.slice(-1, 1), ones}, -1)
                               .flip({-1})
                               .cumprod(-1)
                               .flip({-1});
  return (before * after).movedim(-1, *dim);
}

// Python's _renorm_factor: renorm's scale per slice along `dim` (keepdim
// shape), its norm, the dims it reduces and where the norm is over maxnorm.
struct RenormFactor {
  at::Tensor factor;
  at::Tensor norm;
  std::vector<int64_t> dims;
  at::Tensor over;
};

RenormFactor renorm_factor(
    const at::Tensor& self,
    const c10::Scalar& p,
    int64_t dim,
    const c10::Scalar& maxnorm) {
  RenormFactor r;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != py_mod(dim, self.dim())) {
      r.dims.push_back(d);
    }
  }
  r.norm = at::linalg_vector_norm(self, p, r.dims, true);
  r.over = at::gt(r.norm, maxnorm);
  // Python's `maxnorm / t` is `t.reciprocal() * maxnorm`.
  r.factor = at::where(r.over, at::reciprocal(r.norm + 1e-7) * maxnorm, 1.0);
  return r;
}

}  // namespace

at::Tensor amax_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const at::Tensor& result,
    at::OptionalIntArrayRef dim,
    bool keepdim) {
  const std::vector<int64_t> dims = reduce_dims(dim, self_p);
  const at::Tensor mask =
      at::eq(self_p, expand_reduced_to(result, self_p, dim, keepdim));
  const at::Tensor count = mask.sum(dims, true);
  const at::Tensor sum = (self_t * mask).sum(dims, keepdim);
  return sum / (keepdim || dims.empty() ? count : count.squeeze(dims));
}

at::Tensor amax_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const at::Tensor& result,
    std::optional<int64_t> dim,
    bool keepdim) {
  if (!dim.has_value()) {
    return amax_tangent(
        self_t, self_p, result, at::OptionalIntArrayRef(), keepdim);
  }
  const int64_t one = *dim;
  return amax_tangent(
      self_t, self_p, result, at::OptionalIntArrayRef(at::IntArrayRef(one)),
      keepdim);
}

at::Tensor gather_reduced(
    const at::Tensor& t, int64_t dim, const at::Tensor& indices, bool keepdim) {
  if (t.dim() == 0) {
    return t.clone();
  }
  if (keepdim) {
    return t.gather(dim, indices);
  }
  return t.gather(dim, indices.unsqueeze(dim)).squeeze(dim);
}

at::Tensor vector_norm_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const std::optional<c10::Scalar>& ord,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result) {
  const at::Tensor scaled =
      vector_norm_scaled(self_p, ord, dim, keepdim, result);
  at::Tensor t = self_t;
  if (t.sizes() != self_p.sizes()) {
    t = t.expand(self_p.sizes());
  }
  const at::Tensor weighted = as_real_like(scaled.conj() * t, result);
  return sum_reduced(weighted, self_p, dim, keepdim).to(result.scalar_type());
}

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

at::Tensor dist_tangent(
    const at::Tensor& t,
    const at::Tensor& self_p,
    const at::Tensor& other_p,
    const std::optional<c10::Scalar>& p,
    const at::Tensor& result) {
  const at::Tensor diff = self_p - other_p;
  return vector_norm_tangent(
      t.expand(diff.sizes()), diff, p, std::nullopt, false, result);
}

at::Tensor var_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    const std::optional<c10::Scalar>& correction,
    bool keepdim,
    const at::Tensor& result) {
  const std::vector<int64_t> dims = reduce_dims(dim, self_p);
  const at::Tensor centered =
      self_p - (dims.empty() ? self_p : self_p.mean(dims, true));
  at::Tensor weighted = as_real_like(centered.conj() * self_t, result);
  // Python's `2 / dof` is `dof.reciprocal() * 2`.
  weighted = weighted * (at::reciprocal(var_dof(self_p, dim, correction)) * 2);
  return sum_reduced(weighted, self_p, dim, keepdim);
}

at::Tensor std_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    const std::optional<c10::Scalar>& correction,
    bool keepdim,
    const at::Tensor& result) {
  const at::Tensor var_t =
      var_tangent(self_t, self_p, dim, correction, keepdim, result);
  return masked_div(var_t, result * 2);
}

at::Tensor mean_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    bool keepdim) {
  return sum_reduced(self_t, self_p, dim, keepdim) /
      c10::Scalar(numel_reduced(self_p, dim));
}

at::Tensor logsumexp_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result) {
  const at::Tensor w = logsumexp_weights_of(self_p, dim, keepdim, result);
  at::Tensor weighted = self_t * w;
  if (weighted.is_complex() == w.is_complex()) {
    // In w's dtype, as native's in-place product (a float64 tangent of a
    // float32 input gives a float32 tangent).
    weighted = weighted.to(w.scalar_type());
  }
  return sum_reduced(weighted, self_p, dim, keepdim);
}

at::Tensor prod_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    std::optional<int64_t> dim,
    bool keepdim,
    const at::Tensor& result) {
  const at::Tensor w = prod_others(self_p.to(result.scalar_type()), dim);
  // Promoted, not cast: a float64 tangent of a float32 input stays float64.
  const at::ScalarType dtype =
      c10::promoteTypes(self_t.scalar_type(), result.scalar_type());
  const int64_t one = dim.value_or(0);
  const at::OptionalIntArrayRef dims = dim.has_value()
      ? at::OptionalIntArrayRef(at::IntArrayRef(one))
      : at::OptionalIntArrayRef();
  return sum_reduced(self_t.to(dtype) * w, self_p, dims, keepdim);
}

at::Tensor evenly_read_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, const at::Tensor& result) {
  const at::Tensor mask = at::bitwise_or(
      at::eq(self_p, result), at::bitwise_and(self_p.isnan(), result.isnan()));
  return (self_t * mask).sum() /
      at::clamp(mask.sum(), c10::Scalar(1), std::nullopt);
}

at::Tensor renorm_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const c10::Scalar& p,
    int64_t dim,
    const c10::Scalar& maxnorm) {
  const RenormFactor r = renorm_factor(self_p, p, dim, maxnorm);
  const at::Tensor norm_t =
      vector_norm_tangent(self_t, self_p, p, r.dims, true, r.norm);
  // Python's `-maxnorm / t ** 2` is `(t ** 2).reciprocal() * -maxnorm`.
  const at::Tensor dfactor =
      at::where(
          r.over, at::reciprocal(at::pow(r.norm + 1e-7, 2)) * (-maxnorm), 0.0) *
      norm_t;
  return self_t * r.factor + self_p * dfactor;
}

at::Tensor scan_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    int64_t dim,
    c10::string_view kind) {
  if (self_p.dim() == 0) {
    return self_t.clone();  // one element: cumprod and logcumsumexp are identity
  }
  const at::Tensor m = scan_partials(self_p, dim, kind);
  const at::Tensor t = self_t.movedim(dim, -1);
  return (t.unsqueeze(-1) * m).sum(at::IntArrayRef{-2}).movedim(-1, dim);
}

at::Tensor gather_selected(
    const at::Tensor& t, int64_t dim, const at::Tensor& indices) {
  if (t.dim() == 0) {
    return t.clone();
  }
  return t.gather(dim, indices);
}

}  // namespace dualgen::formulas
