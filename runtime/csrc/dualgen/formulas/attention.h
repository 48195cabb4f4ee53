// C++ twins of dualgen.formulas.attention (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// The tangent of output (index 0) or logsumexp (index 1) of
// _scaled_dot_product_flash_attention_for_cpu; attn_mask and attn_mask_t may be
// undefined (None). Refuses dropout_p != 0.
at::Tensor flash_attention_tangent(
    int64_t index,
    const at::Tensor& query_t,
    const at::Tensor& key_t,
    const at::Tensor& value_t,
    const at::Tensor& attn_mask_t,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& attn_mask,
    const at::Tensor& output,
    const at::Tensor& logsumexp,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale);

// The tangent of grad_query (index 0), grad_key (1) or grad_value (2) of
// _scaled_dot_product_flash_attention_for_cpu_backward, in every tensor input;
// attn_mask and attn_mask_t may be undefined (None). Refuses dropout_p != 0.
at::Tensor flash_attention_backward_tangent(
    int64_t index,
    const at::Tensor& grad_out_t,
    const at::Tensor& query_t,
    const at::Tensor& key_t,
    const at::Tensor& value_t,
    const at::Tensor& out_t,
    const at::Tensor& logsumexp_t,
    const at::Tensor& attn_mask_t,
    const at::Tensor& grad_out,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& out,
    const at::Tensor& logsumexp,
    const at::Tensor& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale);

}  // namespace dualgen::formulas
