#include "formulas.h"  // generated from twins.yaml

#include <cmath>
#include <limits>
#include <tuple>

namespace dualgen::formulas {

namespace {

at::Tensor split_heads(const at::Tensor& x, int64_t num_head) {
  return x.reshape({x.size(0), x.size(1), num_head, x.size(2) / num_head}).transpose(1, 2);
}

at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

at::Tensor bool_mask(const at::Tensor& mask, std::optional<int64_t> mask_type,
                     const at::Tensor& scores) {
  if (!mask.defined()) return at::Tensor();
  at::Tensor m = mask.to(at::kBool);
  if (mask_type.has_value() && *mask_type == 1) {
    m = m.reshape({scores.size(0), 1, 1, scores.size(-1)});
  }
  return m;
}

// (out, out_t, p, p_t)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> mha_jvp(
    const at::Tensor& query_t, const at::Tensor& key_t, const at::Tensor& value_t,
    const at::Tensor& w_t, const at::Tensor& b_t, const at::Tensor& wo_t,
    const at::Tensor& bo_t, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const at::Tensor& mask, std::optional<int64_t> mask_type) {
  const double c = 1.0 / std::sqrt(static_cast<double>(embed_dim / num_head));
  const auto w = qkv_weight.chunk(3);
  const auto b = qkv_bias.chunk(3);
  const auto wt = w_t.chunk(3);
  const auto bt = b_t.chunk(3);
  const at::Tensor q = split_heads((at::matmul(query, w[0].t()) + b[0]) * c, num_head);
  const at::Tensor k = split_heads(at::matmul(key, w[1].t()) + b[1], num_head);
  const at::Tensor v = split_heads(at::matmul(value, w[2].t()) + b[2], num_head);
  const at::Tensor q_t = split_heads(
      (at::matmul(query_t, w[0].t()) + at::matmul(query, wt[0].t()) + bt[0]) * c, num_head);
  const at::Tensor k_t = split_heads(
      at::matmul(key_t, w[1].t()) + at::matmul(key, wt[1].t()) + bt[1], num_head);
  const at::Tensor v_t = split_heads(
      at::matmul(value_t, w[2].t()) + at::matmul(value, wt[2].t()) + bt[2], num_head);
  at::Tensor s = at::matmul(q, k.transpose(-2, -1));
  const at::Tensor m = bool_mask(mask, mask_type, s);
  if (m.defined()) s = s.masked_fill(m, -std::numeric_limits<double>::infinity());
  const at::Tensor p = at::softmax(s, -1);
  const at::Tensor s_t =
      at::matmul(q_t, k.transpose(-2, -1)) + at::matmul(q, k_t.transpose(-2, -1));
  at::Tensor ps_t = p * s_t;
  if (m.defined()) ps_t = ps_t.masked_fill(m, 0.0);
  const at::Tensor p_t = ps_t - p * ps_t.sum(-1, true);
  const at::Tensor ctx = merge_heads(at::matmul(p, v));
  const at::Tensor ctx_t = merge_heads(at::matmul(p_t, v) + at::matmul(p, v_t));
  at::Tensor out = at::matmul(ctx, proj_weight.t()) + proj_bias;
  at::Tensor out_t =
      at::matmul(ctx_t, proj_weight.t()) + at::matmul(ctx, wo_t.t()) + bo_t;
  return {out, out_t, p, p_t};
}

std::tuple<at::Tensor, at::Tensor> layer_norm_jvp(
    const at::Tensor& x, const at::Tensor& x_t, const at::Tensor& weight,
    const at::Tensor& weight_t, const at::Tensor& bias, const at::Tensor& bias_t,
    double eps) {
  auto [y, mean, rstd] = at::native_layer_norm(x, {x.size(-1)}, weight, bias, eps);
  const at::Tensor xhat = (x - mean) * rstd;
  const at::Tensor xc_t = x_t - x_t.mean(-1, true);
  const at::Tensor xhat_t = rstd * (xc_t - xhat * (xhat * xc_t).mean(-1, true));
  return {y, xhat_t * weight + xhat * weight_t + bias_t};
}

at::Tensor activation_derivative(const at::Tensor& h, bool use_gelu) {
  if (use_gelu) {
    const at::Tensor cdf = 0.5 * (1.0 + at::erf(h * std::sqrt(0.5)));
    const at::Tensor pdf = (-0.5 * h * h).exp() * (1.0 / std::sqrt(2.0 * M_PI));
    return cdf + h * pdf;
  }
  return (h > 0).to(h.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> ffn_jvp(
    const at::Tensor& x, const at::Tensor& x_t, const at::Tensor& w1, const at::Tensor& w1_t,
    const at::Tensor& b1, const at::Tensor& b1_t, const at::Tensor& w2,
    const at::Tensor& w2_t, const at::Tensor& b2, const at::Tensor& b2_t, bool use_gelu) {
  const at::Tensor h = at::matmul(x, w1.t()) + b1;
  const at::Tensor h_t = at::matmul(x_t, w1.t()) + at::matmul(x, w1_t.t()) + b1_t;
  const at::Tensor a = use_gelu ? at::gelu(h) : at::relu(h);
  const at::Tensor a_t = activation_derivative(h, use_gelu) * h_t;
  return {at::matmul(a, w2.t()) + b2,
          at::matmul(a_t, w2.t()) + at::matmul(a, w2_t.t()) + b2_t};
}

}  // namespace

at::Tensor native_multi_head_attention_tangent(
    int64_t index, const at::Tensor& query_t, const at::Tensor& key_t,
    const at::Tensor& value_t, const at::Tensor& qkv_weight_t, const at::Tensor& qkv_bias_t,
    const at::Tensor& proj_weight_t, const at::Tensor& proj_bias_t, const at::Tensor& query,
    const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const at::Tensor& mask, bool need_weights,
    bool average_attn_weights, std::optional<int64_t> mask_type) {
  if (index == 1 && !need_weights) return at::Tensor();
  if (query.numel() == 0) return index == 0 ? at::zeros_like(query) : at::Tensor();
  [[maybe_unused]] auto [out, out_t, p, p_t] =
      mha_jvp(query_t, key_t, value_t, qkv_weight_t, qkv_bias_t, proj_weight_t,
              proj_bias_t, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
              proj_weight, proj_bias, mask, mask_type);
  if (index == 0) return out_t;
  if (average_attn_weights) return p_t.mean(1);
  return p_t;
}

at::Tensor transformer_encoder_layer_tangent(
    const at::Tensor& src_t, const at::Tensor& qkv_weight_t, const at::Tensor& qkv_bias_t,
    const at::Tensor& proj_weight_t, const at::Tensor& proj_bias_t,
    const at::Tensor& norm_weight_1_t, const at::Tensor& norm_bias_1_t,
    const at::Tensor& norm_weight_2_t, const at::Tensor& norm_bias_2_t,
    const at::Tensor& ffn_weight_1_t, const at::Tensor& ffn_bias_1_t,
    const at::Tensor& ffn_weight_2_t, const at::Tensor& ffn_bias_2_t, const at::Tensor& src,
    int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2, const at::Tensor& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src_t.clone();
  if (norm_first) {
    auto [n1, n1_t] = layer_norm_jvp(src, src_t, norm_weight_1, norm_weight_1_t,
                                     norm_bias_1, norm_bias_1_t, eps);
    [[maybe_unused]] auto [a, a_t, p, p_t] =
        mha_jvp(n1_t, n1_t, n1_t, qkv_weight_t, qkv_bias_t, proj_weight_t, proj_bias_t,
                n1, n1, n1, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                proj_bias, mask, mask_type);
    const at::Tensor x1 = a + src;
    const at::Tensor x1_t = a_t + src_t;
    [[maybe_unused]] auto [n2, n2_t] = layer_norm_jvp(x1, x1_t, norm_weight_2, norm_weight_2_t,
                                     norm_bias_2, norm_bias_2_t, eps);
    [[maybe_unused]] auto [f, f_t] = ffn_jvp(n2, n2_t, ffn_weight_1, ffn_weight_1_t, ffn_bias_1,
                            ffn_bias_1_t, ffn_weight_2, ffn_weight_2_t, ffn_bias_2,
                            ffn_bias_2_t, use_gelu);
    return f_t + x1_t;
  }
  [[maybe_unused]] auto [a, a_t, p, p_t] =
      mha_jvp(src_t, src_t, src_t, qkv_weight_t, qkv_bias_t, proj_weight_t, proj_bias_t,
              src, src, src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
              proj_bias, mask, mask_type);
  auto [x1, x1_t] = layer_norm_jvp(a + src, a_t + src_t, norm_weight_1, norm_weight_1_t,
                                   norm_bias_1, norm_bias_1_t, eps);
  [[maybe_unused]] auto [f, f_t] = ffn_jvp(x1, x1_t, ffn_weight_1, ffn_weight_1_t, ffn_bias_1, ffn_bias_1_t,
                          ffn_weight_2, ffn_weight_2_t, ffn_bias_2, ffn_bias_2_t, use_gelu);
  [[maybe_unused]] auto [y, y_t] = layer_norm_jvp(f + x1, f_t + x1_t, norm_weight_2, norm_weight_2_t,
                                 norm_bias_2, norm_bias_2_t, eps);
  return y_t;
}

}  // namespace dualgen::formulas
