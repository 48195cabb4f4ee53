// C++ twins of dualgen.formulas.transformer (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// The tangent of output 0 (attention output) or 1 (attention weights; undefined
// without need_weights) of _native_multi_head_attention, in query, key, value
// and the four parameters (all tangents defined); mask may be undefined.
at::Tensor native_multi_head_attention_tangent(
    int64_t index,
    const at::Tensor& query_t,
    const at::Tensor& key_t,
    const at::Tensor& value_t,
    const at::Tensor& qkv_weight_t,
    const at::Tensor& qkv_bias_t,
    const at::Tensor& proj_weight_t,
    const at::Tensor& proj_bias_t,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    int64_t embed_dim,
    int64_t num_head,
    const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight,
    const at::Tensor& proj_bias,
    const at::Tensor& mask,
    bool need_weights,
    bool average_attn_weights,
    std::optional<int64_t> mask_type);

// The tangent of _transformer_encoder_layer_fwd in src and the twelve
// parameters (all tangents defined); mask may be undefined.
at::Tensor transformer_encoder_layer_tangent(
    const at::Tensor& src_t,
    const at::Tensor& qkv_weight_t,
    const at::Tensor& qkv_bias_t,
    const at::Tensor& proj_weight_t,
    const at::Tensor& proj_bias_t,
    const at::Tensor& norm_weight_1_t,
    const at::Tensor& norm_bias_1_t,
    const at::Tensor& norm_weight_2_t,
    const at::Tensor& norm_bias_2_t,
    const at::Tensor& ffn_weight_1_t,
    const at::Tensor& ffn_bias_1_t,
    const at::Tensor& ffn_weight_2_t,
    const at::Tensor& ffn_bias_2_t,
    const at::Tensor& src,
    int64_t embed_dim,
    int64_t num_heads,
    const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight,
    const at::Tensor& proj_bias,
    bool use_gelu,
    bool norm_first,
    double eps,
    const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2,
    const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2,
    const at::Tensor& mask,
    std::optional<int64_t> mask_type);

}  // namespace dualgen::formulas
