#include "formulas.h"  // generated from twins.yaml

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

// The norm's primals (grad_out, input, weight, mean, rstd), or their tangents:
// the lists norm_backward_tangent takes, by name.
struct NormArgs {
  at::Tensor grad_out, input, weight, mean, rstd;

  explicit NormArgs(const TensorList& list) {
    TORCH_CHECK_VALUE(
        list.size() == 5,
        "norm_backward_tangent: expected 5 tensors (grad_out, input, weight, "
        "mean, rstd), got ",
        list.size());
    grad_out = list[0];
    input = list[1];
    weight = list[2];
    mean = list[3];
    rstd = list[4];
  }
};

// Twin of _norm_layout's results: g, x, mean, rstd (eval batch norm: from the
// running statistics) and the weight (undefined without one), in the layout.
struct NormTensors {
  at::Tensor g, x, m, r, w;
};

NormTensors norm_tensors(
    const NormLayout& layout, const NormArgs& p, bool train, double eps) {
  NormTensors n;
  n.g = layout.view(p.grad_out);
  n.x = layout.view(p.input);
  n.m = layout.stat(p.mean);
  n.r = layout.is_batch() && !train ? layout.stat((p.rstd + eps).rsqrt())
                                    : layout.stat(p.rstd);
  if (p.weight.defined()) {
    n.w = layout.wview(p.weight);
  }
  return n;
}

// Twin of _moving_with_input: the saved statistics as functions of x for
// autograd (their values, with the derivatives of x's mean and rstd), where
// autograd records x and not them.
std::pair<at::Tensor, at::Tensor> moving_with_input(
    const NormLayout& layout, const at::Tensor& x, const at::Tensor& m,
    const at::Tensor& r) {
  if (!x.requires_grad() || m.requires_grad() || r.requires_grad()) {
    return {m, r};
  }
  at::Tensor mean = layout.mean(x);
  at::Tensor var = layout.mean((x - mean).square());
  return {m + (mean - mean.detach()), r - 0.5 * r.pow(3) * (var - var.detach())};
}

// A value and its tangent.
struct Dual {
  at::Tensor p, t;
};

// grad_input's tangent (training mode) from those of u = g w, xhat and r:
// r_t inner + r inner_t, inner = u - mean(u) - xhat mean(u xhat).
at::Tensor grad_input_tangent(
    const NormLayout& layout, const Dual& u, const Dual& xhat, const Dual& r) {
  at::Tensor inner = u.p - layout.mean(u.p) - xhat.p * layout.mean(u.p * xhat.p);
  at::Tensor inner_t = u.t - layout.mean(u.t) -
      xhat.t * layout.mean(u.p * xhat.p) -
      xhat.p * layout.mean(u.t * xhat.p + u.p * xhat.t);
  return layout.out(r.t * inner + r.p * inner_t);
}

}  // namespace

at::Tensor norm_backward_tangent(
    int64_t which, const at::Tensor& result, c10::string_view kind,
    const TensorList& tangents, const TensorList& primals,
    at::OptionalIntArrayRef extra, bool train, double eps) {
  if (!result.defined()) {
    return at::Tensor();
  }
  const NormArgs v(tangents), p(primals);
  NormLayout layout(kind, p.input, extra);
  auto [g, x, m, r, w] = norm_tensors(layout, p, train, eps);
  bool eval_mode = layout.is_batch() && !train;
  if (!eval_mode && !v.mean.defined()) {
    std::tie(m, r) = moving_with_input(layout, x, m, r);
  }
  at::Tensor xhat = (x - m) * r;
  at::Tensor g_t = v.grad_out.defined() ? layout.view(v.grad_out) : at::Tensor();
  at::Tensor x_t = v.input.defined() ? layout.view(v.input) : at::Tensor();
  at::Tensor w_t = v.weight.defined() ? layout.wview(v.weight) : at::Tensor();
  if (which == 2) {
    return layout.to_weight(g_t);
  }
  at::Tensor xhat_t, r_t;
  if (eval_mode) {
    xhat_t = x_t * r;
  } else if (v.mean.defined()) {
    xhat_t = (x - m) * layout.stat(v.rstd) + r * (x_t - layout.stat(v.mean));
    r_t = layout.stat(v.rstd);
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
  return grad_input_tangent(layout, {u, u_t}, {xhat, xhat_t}, {r, r_t});
}

}  // namespace dualgen::formulas
