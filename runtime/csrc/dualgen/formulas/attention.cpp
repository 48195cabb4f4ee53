#include "formulas.h"  // generated from twins.yaml

#include <cmath>
#include <limits>

namespace dualgen::formulas {

namespace {

void check_dropout(double dropout_p) {
  TORCH_CHECK(
      dropout_p == 0.0,
      "dualgen: _scaled_dot_product_flash_attention_for_cpu with dropout_p=", dropout_p,
      " draws random numbers inside the kernel: it has no derivative; only "
      "dropout_p=0 is differentiable");
}

// t in the kernel's accumulation dtype (float32 for bfloat16 and float16).
at::Tensor acc(const at::Tensor& t) {
  if (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf) {
    return t.to(at::kFloat);
  }
  return t;
}

at::Tensor expand_heads(const at::Tensor& t, int64_t heads) {
  if (t.size(1) == heads) return t;
  return t.repeat_interleave(heads / t.size(1), 1);
}

at::Tensor sum_heads(const at::Tensor& t, int64_t heads) {
  if (t.size(1) == heads) return t;
  return t.reshape({t.size(0), heads, t.size(1) / heads, t.size(2), t.size(3)}).sum(2);
}

double scale_of(const at::Tensor& query, std::optional<double> scale) {
  if (!scale.has_value()) return 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  return *scale;
}

at::Tensor probabilities(const at::Tensor& q, const at::Tensor& kk, const at::Tensor& attn_mask,
                         const at::Tensor& logsumexp, bool is_causal, double scale) {
  at::Tensor s = at::matmul(q, kk.transpose(-2, -1)) * scale;
  if (attn_mask.defined()) s = s + acc(attn_mask);
  if (is_causal) {
    at::Tensor keep =
        at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return (s - acc(logsumexp).unsqueeze(-1)).exp();
}

}  // namespace

at::Tensor flash_attention_tangent(
    int64_t index, const at::Tensor& query_t, const at::Tensor& key_t,
    const at::Tensor& value_t, const at::Tensor& attn_mask_t, const at::Tensor& query,
    const at::Tensor& key, const at::Tensor& value, const at::Tensor& attn_mask,
    const at::Tensor& output, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    std::optional<double> scale) {
  check_dropout(dropout_p);
  const int64_t heads = query.size(1);
  const double sc = scale_of(query, scale);
  const at::Tensor q = acc(query);
  const at::Tensor kk = expand_heads(acc(key), heads);
  const at::Tensor p = probabilities(q, kk, attn_mask, logsumexp, is_causal, sc);
  at::Tensor ds = (at::matmul(acc(query_t), kk.transpose(-2, -1)) +
                   at::matmul(q, expand_heads(acc(key_t), heads).transpose(-2, -1))) *
                  sc;
  if (attn_mask_t.defined()) ds = ds + acc(attn_mask_t);
  const at::Tensor pds = p * ds;
  const at::Tensor lse_t = pds.sum(-1);
  if (index == 1) return lse_t.to(logsumexp.scalar_type());
  const at::Tensor vv = expand_heads(acc(value), heads);
  const at::Tensor out_t = at::matmul(pds - p * lse_t.unsqueeze(-1), vv) +
                           at::matmul(p, expand_heads(acc(value_t), heads));
  return out_t.to(output.scalar_type());
}

at::Tensor flash_attention_backward_tangent(
    int64_t index, const at::Tensor& grad_out_t, const at::Tensor& query_t,
    const at::Tensor& key_t, const at::Tensor& value_t, const at::Tensor& out_t,
    const at::Tensor& logsumexp_t, const at::Tensor& attn_mask_t, const at::Tensor& grad_out,
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& attn_mask,
    double dropout_p, bool is_causal, std::optional<double> scale) {
  check_dropout(dropout_p);
  const int64_t heads = query.size(1);
  const double sc = scale_of(query, scale);
  const at::Tensor g = acc(grad_out);
  const at::Tensor q = acc(query);
  const at::Tensor kk = expand_heads(acc(key), heads);
  const at::Tensor vv = expand_heads(acc(value), heads);
  const at::Tensor p = probabilities(q, kk, attn_mask, logsumexp, is_causal, sc);
  const at::Tensor dp = at::matmul(g, vv.transpose(-2, -1));
  const at::Tensor d = (g * acc(out)).sum(-1, true);
  const at::Tensor r = dp - d;

  const at::Tensor qt = acc(query_t);
  const at::Tensor kkt = expand_heads(acc(key_t), heads);
  at::Tensor s_t =
      (at::matmul(qt, kk.transpose(-2, -1)) + at::matmul(q, kkt.transpose(-2, -1))) * sc;
  if (attn_mask_t.defined()) s_t = s_t + acc(attn_mask_t);
  const at::Tensor p_t = p * (s_t - acc(logsumexp_t).unsqueeze(-1));
  const at::Tensor gt = acc(grad_out_t);
  if (index == 2) {
    const at::Tensor res =
        at::matmul(p_t.transpose(-2, -1), g) + at::matmul(p.transpose(-2, -1), gt);
    return sum_heads(res, value.size(1)).to(value.scalar_type());
  }
  const at::Tensor vvt = expand_heads(acc(value_t), heads);
  at::Tensor r_t =
      at::matmul(gt, vv.transpose(-2, -1)) + at::matmul(g, vvt.transpose(-2, -1));
  r_t = r_t - (gt * acc(out) + g * acc(out_t)).sum(-1, true);
  const at::Tensor ds = p * r;
  const at::Tensor ds_t = p_t * r + p * r_t;
  if (index == 0) {
    const at::Tensor res = (at::matmul(ds_t, kk) + at::matmul(ds, kkt)) * sc;
    return res.to(query.scalar_type());
  }
  const at::Tensor res =
      (at::matmul(ds_t.transpose(-2, -1), q) + at::matmul(ds.transpose(-2, -1), qt)) * sc;
  return sum_heads(res, key.size(1)).to(key.scalar_type());
}

}  // namespace dualgen::formulas
