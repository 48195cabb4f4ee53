#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/attention.h"

namespace dualgen::formulas {

namespace {

using OptTensor = std::optional<at::Tensor>;

using binding::undefined_if_none;

}  // namespace

void bind_attention(pybind11::module_& m) {
  m.def(
      "flash_attention_tangent",
      [](int64_t index, const at::Tensor& query_t, const at::Tensor& key_t,
         const at::Tensor& value_t, const OptTensor& attn_mask_t, const at::Tensor& query,
         const at::Tensor& key, const at::Tensor& value, const OptTensor& attn_mask,
         const at::Tensor& output, const at::Tensor& logsumexp, double dropout_p,
         bool is_causal, std::optional<double> scale) {
        return flash_attention_tangent(
            index, query_t, key_t, value_t, undefined_if_none(attn_mask_t), query, key,
            value, undefined_if_none(attn_mask), output, logsumexp, dropout_p, is_causal,
            scale);
      });
  m.def(
      "flash_attention_backward_tangent",
      [](int64_t index, const at::Tensor& grad_out_t, const at::Tensor& query_t,
         const at::Tensor& key_t, const at::Tensor& value_t, const at::Tensor& out_t,
         const at::Tensor& logsumexp_t, const OptTensor& attn_mask_t,
         const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
         const at::Tensor& value, const at::Tensor& out, const at::Tensor& logsumexp,
         const OptTensor& attn_mask, double dropout_p, bool is_causal,
         std::optional<double> scale) {
        return flash_attention_backward_tangent(
            index, grad_out_t, query_t, key_t, value_t, out_t, logsumexp_t,
            undefined_if_none(attn_mask_t), grad_out, query, key, value, out, logsumexp,
            undefined_if_none(attn_mask), dropout_p, is_causal, scale);
      });
}

}  // namespace dualgen::formulas
