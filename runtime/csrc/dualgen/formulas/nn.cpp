#include "formulas.h"  // generated from twins.yaml

namespace dualgen::formulas {

namespace {

// d((x - mean) * rstd) = rstd * (dx - mean(dx) - xhat * mean(xhat * dx)),
// in the input tangent's dtype, as native's.
at::Tensor normalized_tangent(
    const at::Tensor& input_t, const at::Tensor& xhat, const at::Tensor& rstd,
    at::IntArrayRef dims) {
  return (rstd * (input_t - input_t.mean(dims, /*keepdim=*/true) -
                  xhat * (xhat * input_t).mean(dims, /*keepdim=*/true)))
      .to(input_t.scalar_type());
}

// `t` viewed per channel of an `ndim`-dimensional input when `ndim` is given.
at::Tensor per_channel(const at::Tensor& t, std::optional<int64_t> ndim) {
  return ndim.has_value() ? channel_view(t, *ndim) : t;
}

// mean and 1 / sqrt(biased variance + eps) over `dims`, kept broadcastable:
// computed again, not read from the op's saved outputs (nn.py says why).
std::pair<at::Tensor, at::Tensor> statistics(
    const at::Tensor& input_p, at::IntArrayRef dims, double eps) {
  auto [var, mean] = at::var_mean(input_p, dims, /*correction=*/0,
                                  /*keepdim=*/true);
  return {mean, (var + eps).rsqrt()};
}

std::vector<int64_t> layer_norm_dims(at::IntArrayRef normalized_shape) {
  const auto n = static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = -n; d < 0; ++d) {
    dims.push_back(d);
  }
  return dims;
}

std::vector<int64_t> batch_dims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) {
    dims.push_back(d);
  }
  return dims;
}

// The mean and invstd of batch norm, viewed per channel: the batch's in
// training, the running ones in eval.
std::pair<at::Tensor, at::Tensor> batch_norm_stats(
    const at::Tensor& input_p, const at::Tensor& running_mean,
    const at::Tensor& running_var, bool training, double eps) {
  const int64_t ndim = input_p.dim();
  if (training) {
    return statistics(input_p, batch_dims(input_p), eps);
  }
  TORCH_CHECK(
      running_mean.defined() && running_var.defined(),
      "batch norm in eval mode needs running_mean and running_var");
  return {channel_view(running_mean, ndim),
          channel_view((running_var + eps).rsqrt(), ndim)};
}

}  // namespace

at::Tensor apply_loss_reduction(const at::Tensor& t, int64_t reduction) {
  if (reduction == 1) {
    return t.mean();
  }
  if (reduction == 2) {
    return t.sum();
  }
  return t;
}

at::Tensor expand_loss_grad(
    const at::Tensor& grad, const at::Tensor& like, int64_t reduction) {
  if (reduction == 1) {
    return grad.expand(like.sizes()) / like.numel();
  }
  if (reduction == 2) {
    return grad.expand(like.sizes());
  }
  return grad;
}

at::Tensor channel_view(const at::Tensor& t, int64_t ndim) {
  std::vector<int64_t> shape{-1};
  for (int64_t i = 0; i < ndim - 2; ++i) {
    shape.push_back(1);
  }
  return t.reshape(shape);
}

std::vector<int64_t> group_shape(const at::Tensor& t, int64_t group) {
  int64_t rest = 1;
  for (int64_t i = 1; i < t.dim(); ++i) {
    rest *= t.size(i);
  }
  return {t.size(0), group, rest / group};
}

at::Tensor layer_norm_xhat(
    const at::Tensor& input_p, at::IntArrayRef normalized_shape, double eps) {
  auto [mean, rstd] = statistics(input_p, layer_norm_dims(normalized_shape), eps);
  return (input_p - mean) * rstd;
}

at::Tensor layer_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    at::IntArrayRef normalized_shape, double eps) {
  const std::vector<int64_t> dims = layer_norm_dims(normalized_shape);
  auto [mean, rstd] = statistics(input_p, dims, eps);
  at::Tensor xhat = (input_p - mean) * rstd;
  return normalized_tangent(input_t, xhat, rstd, dims);
}

at::Tensor batch_norm_xhat(
    const at::Tensor& input_p, const at::Tensor& running_mean,
    const at::Tensor& running_var, bool training, double eps) {
  auto [mean, invstd] =
      batch_norm_stats(input_p, running_mean, running_var, training, eps);
  return (input_p - mean) * invstd;
}

at::Tensor batch_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& running_mean, const at::Tensor& running_var,
    bool training, double eps) {
  auto [mean, invstd] =
      batch_norm_stats(input_p, running_mean, running_var, training, eps);
  if (training) {
    return normalized_tangent(input_t, (input_p - mean) * invstd, invstd,
                              batch_dims(input_p));
  }
  return input_t * invstd;
}

at::Tensor group_norm_xhat(
    const at::Tensor& input_p, const at::Tensor& mean, const at::Tensor& rstd,
    int64_t group) {
  at::Tensor x = input_p.reshape(group_shape(input_p, group));
  return ((x - mean.unsqueeze(-1)) * rstd.unsqueeze(-1))
      .reshape(input_p.sizes());
}

at::Tensor group_norm_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& mean, const at::Tensor& rstd, int64_t group) {
  const std::vector<int64_t> shape = group_shape(input_p, group);
  at::Tensor xhat =
      (input_p.reshape(shape) - mean.unsqueeze(-1)) * rstd.unsqueeze(-1);
  return normalized_tangent(input_t.reshape(shape), xhat, rstd.unsqueeze(-1),
                            {-1})
      .reshape(input_p.sizes());
}

at::Tensor norm_affine_tangent(
    const at::Tensor& normalized_t, const at::Tensor& xhat,
    const at::Tensor& weight_p, const at::Tensor& weight_t,
    const at::Tensor& bias_t, std::optional<int64_t> ndim) {
  at::Tensor out = normalized_t;
  if (weight_p.defined()) {
    // A weight tangent of another dtype than the weight is present (in place:
    // the dtype stays); one of the weight's dtype is taken for absent.
    const auto dtype =
        weight_t.scalar_type() == weight_p.scalar_type()
            ? at::promote_types(normalized_t.scalar_type(), weight_p.scalar_type())
            : normalized_t.scalar_type();
    out = (normalized_t * per_channel(weight_p, ndim) +
           xhat * per_channel(weight_t, ndim))
              .to(dtype);
  }
  if (bias_t.defined()) {
    out = (out + per_channel(bias_t, ndim)).to(out.scalar_type());
  }
  return out;
}

at::Tensor group_norm_mean_tangent(const at::Tensor& input_t, int64_t group) {
  return input_t.reshape(group_shape(input_t, group)).mean(-1);
}

at::Tensor group_norm_rstd_tangent(
    const at::Tensor& input_t, const at::Tensor& input_p,
    const at::Tensor& mean, const at::Tensor& rstd, int64_t group) {
  // -rstd^3 * mean((x - mean) * dx) over each group.
  const std::vector<int64_t> shape = group_shape(input_p, group);
  at::Tensor centered = input_p.reshape(shape) - mean.unsqueeze(-1);
  return -(rstd.pow(3)) * (centered * input_t.reshape(shape)).mean(-1);
}

at::Tensor bce_self_derivative(
    const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  // w * (self - target) / (self * (1 - self)), the denominator kept from 0.
  at::Tensor d =
      (self - target) / (self * at::rsub(self, 1)).clamp_min(1e-12);
  return weight.defined() ? d * weight : d;
}

at::Tensor bce_target_derivative(
    const at::Tensor& self, const at::Tensor& weight) {
  // w * (log(1 - self) - log(self)), each log clamped at -100.
  at::Tensor d =
      at::rsub(self, 1).log().clamp_min(-100) - self.log().clamp_min(-100);
  return weight.defined() ? d * weight : d;
}

at::Tensor bce_logits_self_derivative(
    const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
    const at::Tensor& pos_weight) {
  // w * (sigmoid(x) * (1 - y) - (1 - sigmoid(x)) * pw * y), pw = 1 if absent.
  at::Tensor sig = self.sigmoid();
  at::Tensor d;
  if (!pos_weight.defined()) {
    d = sig - target;
  } else {
    d = sig * at::rsub(target, 1) - at::rsub(sig, 1) * pos_weight * target;
  }
  return weight.defined() ? d * weight : d;
}

at::Tensor bce_logits_target_derivative(
    const at::Tensor& self, const at::Tensor& weight,
    const at::Tensor& pos_weight) {
  // -w * (x + (pw - 1) log sigmoid(x)).
  at::Tensor d = -self;
  if (pos_weight.defined()) {
    d = d - (pos_weight - 1) * at::log_sigmoid(self);
  }
  return weight.defined() ? d * weight : d;
}

double dropout_scale(double p, std::optional<bool> train) {
  if (train.has_value() && !*train) {
    return 1.0;
  }
  return p == 1 ? 0.0 : 1.0 / (1.0 - p);
}

at::Tensor weight_norm_broadcast(const at::Tensor& t, const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> shape(static_cast<size_t>(v.dim()), 1);
  if (dim != -1) {
    const int64_t d = at::maybe_wrap_dim(dim, v.dim());
    shape[static_cast<size_t>(d)] = v.size(d);
  }
  return t.reshape(shape);
}

}  // namespace dualgen::formulas
