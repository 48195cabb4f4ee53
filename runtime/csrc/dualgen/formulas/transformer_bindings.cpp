#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/transformer.h"

namespace dualgen::formulas {

namespace {

using OptTensor = std::optional<at::Tensor>;

using binding::undefined_if_none;

}  // namespace

void bind_transformer(pybind11::module_& m) {
  m.def(
      "native_multi_head_attention_tangent",
      [](int64_t index, const at::Tensor& query_t, const at::Tensor& key_t,
         const at::Tensor& value_t, const at::Tensor& qkv_weight_t,
         const at::Tensor& qkv_bias_t, const at::Tensor& proj_weight_t,
         const at::Tensor& proj_bias_t, const at::Tensor& query, const at::Tensor& key,
         const at::Tensor& value, int64_t embed_dim, int64_t num_head,
         const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
         const at::Tensor& proj_weight, const at::Tensor& proj_bias, const OptTensor& mask,
         bool need_weights, bool average_attn_weights, std::optional<int64_t> mask_type)
          -> OptTensor {
        at::Tensor t = native_multi_head_attention_tangent(
            index, query_t, key_t, value_t, qkv_weight_t, qkv_bias_t, proj_weight_t,
            proj_bias_t, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
            proj_weight, proj_bias, undefined_if_none(mask), need_weights,
            average_attn_weights, mask_type);
        return t.defined() ? OptTensor(t) : std::nullopt;
      });
  m.def(
      "transformer_encoder_layer_tangent",
      [](const at::Tensor& src_t, const at::Tensor& qkv_weight_t,
         const at::Tensor& qkv_bias_t, const at::Tensor& proj_weight_t,
         const at::Tensor& proj_bias_t, const at::Tensor& norm_weight_1_t,
         const at::Tensor& norm_bias_1_t, const at::Tensor& norm_weight_2_t,
         const at::Tensor& norm_bias_2_t, const at::Tensor& ffn_weight_1_t,
         const at::Tensor& ffn_bias_1_t, const at::Tensor& ffn_weight_2_t,
         const at::Tensor& ffn_bias_2_t, const at::Tensor& src, int64_t embed_dim,
         int64_t num_heads, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
         const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
         bool norm_first, double eps, const at::Tensor& norm_weight_1,
         const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
         const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
         const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
         const at::Tensor& ffn_bias_2, const OptTensor& mask,
         std::optional<int64_t> mask_type) {
        return transformer_encoder_layer_tangent(
            src_t, qkv_weight_t, qkv_bias_t, proj_weight_t, proj_bias_t, norm_weight_1_t,
            norm_bias_1_t, norm_weight_2_t, norm_bias_2_t, ffn_weight_1_t, ffn_bias_1_t,
            ffn_weight_2_t, ffn_bias_2_t, src, embed_dim, num_heads, qkv_weight, qkv_bias,
            proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
            norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
            undefined_if_none(mask), mask_type);
      });
}

}  // namespace dualgen::formulas
