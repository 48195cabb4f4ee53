#include "formulas.h"  // generated from twins.yaml

#include <array>

namespace dualgen::formulas {

namespace {

// [0, 2, 3, ..., ndim - 1]: every dimension but the channel one.
std::vector<int64_t> all_but_channel(int64_t ndim) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < ndim; ++d) {
    dims.push_back(d);
  }
  return dims;
}

// The convolution's own arguments that its backward passes through (twin of
// backward_ops' `conv_args`).
struct ConvArgs {
  at::IntArrayRef stride, padding, dilation;
  bool transposed;
  at::IntArrayRef output_padding;
  int64_t groups;
};

// Twin of _conv_backward: aten::convolution_backward without bias sizes.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_backward(
    const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, const ConvArgs& conv, std::array<bool, 3> mask) {
  return at::convolution_backward(
      grad_output, input, weight, std::nullopt, conv.stride, conv.padding,
      conv.dilation, conv.transposed, conv.output_padding, conv.groups, mask);
}

// Twin of _NormLayout: how one norm's tensors are laid out so that `dims` are
// the reduced ones (see backward_ops.py).
class NormLayout {
 public:
  NormLayout(c10::string_view kind, const at::Tensor& input,
             at::OptionalIntArrayRef extra)
      : shape_(input.sizes().vec()), ndim_(input.dim()) {
    if (kind == "layer") {
      kind_ = Kind::Layer;
      TORCH_CHECK(extra.has_value(), "layer norm needs normalized_shape");
      wshape_ = extra->vec();
      int64_t k = static_cast<int64_t>(wshape_.size());
      dims_ = dim_range(ndim_ - k, ndim_);
    } else if (kind == "batch") {
      kind_ = Kind::Batch;
      dims_ = all_but_channel(ndim_);
    } else {  // group: [N, group, C / group * HxW]
      kind_ = Kind::Group;
      TORCH_CHECK(
          extra.has_value() && extra->size() == 1,
          "group norm needs the group count");
      group_ = (*extra)[0];
      c_ = input.size(1);
      group_shape_ = group_shape(input, group_);
      dims_ = {-1};
      hxw_ = 1;
      for (int64_t d = 2; d < ndim_; ++d) {
        hxw_ *= input.size(d);
      }
    }
  }

  bool is_batch() const { return kind_ == Kind::Batch; }

  // An input-shaped tensor in the layout.
  at::Tensor view(const at::Tensor& t) const {
    return kind_ == Kind::Group ? t.reshape(group_shape_) : t;
  }

  // A statistic (mean, rstd) broadcastable in the layout.
  at::Tensor stat(const at::Tensor& t) const {
    return kind_ == Kind::Group ? t.unsqueeze(-1) : ungrouped(t);
  }

  // The weight (or a bias-shaped gradient) broadcast in the layout.
  at::Tensor wview(const at::Tensor& w) const {
    if (kind_ == Kind::Group) {
      return w.reshape({1, c_, 1})
          .expand({1, c_, hxw_})
          .reshape({1, group_, -1});
    }
    return ungrouped(w);
  }

  // A layout tensor back in the input's shape.
  at::Tensor out(const at::Tensor& t) const { return t.reshape(shape_); }

  // A layout tensor summed to the weight's (or bias's) shape.
  at::Tensor to_weight(const at::Tensor& t) const {
    at::Tensor r = t.reshape(shape_);
    if (kind_ == Kind::Layer) {
      int64_t lead = ndim_ - static_cast<int64_t>(wshape_.size());
      return lead ? r.sum(dim_range(0, lead)) : r;
    }
    return r.sum(all_but_channel(ndim_));
  }

  at::Tensor mean(const at::Tensor& t) const {
    return t.mean(dims_, /*keepdim=*/true);
  }

 private:
  enum class Kind { Layer, Batch, Group };

  // A statistic or weight of layer norm (already broadcastable: it has the
  // trailing normalized shape) or batch norm (per channel) in the layout.
  at::Tensor ungrouped(const at::Tensor& t) const {
    return kind_ == Kind::Batch ? channel_view(t, ndim_) : t;
  }

  Kind kind_;
  std::vector<int64_t> shape_;
  int64_t ndim_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> wshape_;       // layer
  std::vector<int64_t> group_shape_;  // group
  int64_t group_ = 0, c_ = 0, hxw_ = 0;
};

// Twin of _norm_layout's results: x, mean, rstd (eval batch norm: from the
// running statistics) and the weight (undefined without one), in the layout.
struct NormTensors {
  at::Tensor x, m, r, w;
};

NormTensors norm_tensors(
    const NormLayout& layout,
    const at::Tensor& input,
    const at::Tensor& weight,
    const at::Tensor& mean,
    const at::Tensor& rstd,
    bool train,
    double eps) {
  NormTensors n;
  n.x = layout.view(input);
  if (layout.is_batch() && !train) {
    n.m = layout.stat(mean);
    n.r = layout.stat((rstd + eps).rsqrt());
  } else {
    n.m = layout.stat(mean);
    n.r = layout.stat(rstd);
  }
  if (weight.defined()) {
    n.w = layout.wview(weight);
  }
  return n;
}

// grad_input's tangent (training mode) from those of u = g w, xhat and r:
// r_t inner + r inner_t, inner = u - mean(u) - xhat mean(u xhat).
at::Tensor grad_input_tangent(
    const NormLayout& layout,
    const at::Tensor& u,
    const at::Tensor& u_t,
    const at::Tensor& xhat,
    const at::Tensor& xhat_t,
    const at::Tensor& r,
    const at::Tensor& r_t) {
  at::Tensor inner = u - layout.mean(u) - xhat * layout.mean(u * xhat);
  at::Tensor inner_t = u_t - layout.mean(u_t) -
      xhat_t * layout.mean(u * xhat) -
      xhat * layout.mean(u_t * xhat + u * xhat_t);
  return layout.out(r_t * inner + r * inner_t);
}

}  // namespace

at::Tensor convolution_backward_tangent(
    int64_t which,
    const at::Tensor& result,
    const at::Tensor& grad_output_t,
    const at::Tensor& other_t,
    const at::Tensor& grad_output,
    const at::Tensor& input,
    const at::Tensor& weight,
    at::IntArrayRef stride,
    at::IntArrayRef padding,
    at::IntArrayRef dilation,
    bool transposed,
    at::IntArrayRef output_padding,
    int64_t groups) {
  if (!result.defined()) {
    return at::Tensor();
  }
  if (which == 2) {
    return grad_output_t.sum(all_but_channel(grad_output_t.dim()));
  }
  TORCH_CHECK_INDEX(which == 0 || which == 1, "tuple index out of range");
  std::array<bool, 3> mask{which == 0, which == 1, false};
  const ConvArgs args{stride, padding, dilation, transposed, output_padding,
                      groups};
  auto conv = [&](const at::Tensor& g, const at::Tensor& x, const at::Tensor& w) {
    return conv_backward(g, x, w, args, mask);
  };
  if (which == 0) {
    at::Tensor tangent = std::get<0>(conv(grad_output_t, input, weight));
    at::Tensor other = std::get<0>(conv(grad_output, input, other_t));
    return tangent + other;
  }
  at::Tensor tangent = std::get<1>(conv(grad_output_t, input, weight));
  at::Tensor other = std::get<1>(conv(grad_output, other_t, weight));
  return tangent + other;
}

at::Tensor norm_backward_tangent(
    int64_t which,
    const at::Tensor& result,
    c10::string_view kind,
    const at::Tensor& grad_out_t,
    const at::Tensor& input_t,
    const at::Tensor& weight_t,
    const at::Tensor& mean_t,
    const at::Tensor& rstd_t,
    const at::Tensor& grad_out,
    const at::Tensor& input,
    const at::Tensor& weight,
    const at::Tensor& mean,
    const at::Tensor& rstd,
    at::OptionalIntArrayRef extra,
    bool train,
    double eps) {
  if (!result.defined()) {
    return at::Tensor();
  }
  NormLayout layout(kind, input, extra);
  auto [x, m, r, w] = norm_tensors(layout, input, weight, mean, rstd, train, eps);
  at::Tensor g = layout.view(grad_out);
  at::Tensor xhat = (x - m) * r;
  at::Tensor g_t = grad_out_t.defined() ? layout.view(grad_out_t) : at::Tensor();
  at::Tensor x_t = input_t.defined() ? layout.view(input_t) : at::Tensor();
  at::Tensor w_t = weight_t.defined() ? layout.wview(weight_t) : at::Tensor();
  if (which == 2) {
    return layout.to_weight(g_t);
  }
  bool eval_mode = layout.is_batch() && !train;
  at::Tensor xhat_t, r_t;
  if (eval_mode) {
    xhat_t = x_t * r;
  } else if (mean_t.defined()) {
    xhat_t = (x - m) * layout.stat(rstd_t) + r * (x_t - layout.stat(mean_t));
    r_t = layout.stat(rstd_t);
  } else {
    xhat_t = r * (x_t - layout.mean(x_t) - xhat * layout.mean(xhat * x_t));
    r_t = -r * r * layout.mean(xhat * x_t);
  }
  if (which == 1) {
    return layout.to_weight(g_t * xhat + g * xhat_t);
  }
  at::Tensor u = w.defined() ? g * w : g;
  at::Tensor u_t = w.defined() ? g_t * w : g_t;
  if (w_t.defined()) {
    u_t = u_t + g * w_t;
  }
  if (eval_mode) {
    return layout.out(u_t * r);
  }
  return grad_input_tangent(layout, u, u_t, xhat, xhat_t, r, r_t);
}

}  // namespace dualgen::formulas
