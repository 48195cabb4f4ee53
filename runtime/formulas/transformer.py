"""Helpers for the inference fast paths of nn.MultiheadAttention and
nn.TransformerEncoderLayer (eval mode, no input or parameter requiring grad:
under `torch.no_grad()`): `aten::_native_multi_head_attention` and
`aten::_transformer_encoder_layer_fwd`, reached instead of the CPU
flash-attention kernel (whose helpers are in `attention`).

The helpers follow those kernels' definitions (a mask there is boolean, True =
masked out: a float mask counts where it is nonzero; a key padding mask,
mask_type 1, is (B, S); a row masked everywhere is NaN, as the kernel's).
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import bool_mask, merge_heads, split_heads

__all__ = [
    "native_multi_head_attention_grads",
    "transformer_encoder_layer_grads",
]


def _linear_grads(g, x, weight):
    """Gradients (x, weight, bias) of x W^T + b from g (leading dims flattened)."""
    g2 = g.reshape(-1, g.size(-1))
    return (
        torch.matmul(g, weight),
        torch.matmul(g2.t(), x.reshape(-1, x.size(-1))),
        g2.sum(0),
    )


def native_multi_head_attention_grads(
    grad_output,
    grad_weights,
    query,
    key,
    value,
    embed_dim: int,
    num_head: int,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask,
    need_weights: bool,
    average_attn_weights: bool,
    mask_type,
) -> tuple:
    """Gradients (query, key, value, qkv_weight, qkv_bias, proj_weight, proj_bias)
    of `_native_multi_head_attention` from those of its outputs (None where
    absent): the adjoint of `native_multi_head_attention_tangent`."""
    c = 1.0 / ((embed_dim // num_head) ** 0.5)
    wq, wk, wv = qkv_weight.chunk(3)
    bq, bk, bv = qkv_bias.chunk(3)
    q = split_heads((torch.matmul(query, wq.t()) + bq) * c, num_head)
    k = split_heads(torch.matmul(key, wk.t()) + bk, num_head)
    v = split_heads(torch.matmul(value, wv.t()) + bv, num_head)
    s = torch.matmul(q, k.transpose(-2, -1))
    m = bool_mask(mask, mask_type, s)
    if m is not None:
        s = s.masked_fill(m, float("-inf"))
    p = torch.softmax(s, -1)
    ctx = merge_heads(torch.matmul(p, v))
    g_p = torch.zeros_like(p)
    g_v = torch.zeros_like(v)
    g_proj_weight = torch.zeros_like(proj_weight)
    g_proj_bias = torch.zeros_like(proj_bias)
    if grad_output is not None:
        g_ctx, g_proj_weight, g_proj_bias = _linear_grads(grad_output, ctx, proj_weight)
        g_ctx = split_heads(g_ctx, num_head)
        g_p = torch.matmul(g_ctx, v.transpose(-2, -1))
        g_v = torch.matmul(p.transpose(-2, -1), g_ctx)
    if grad_weights is not None and need_weights:
        if average_attn_weights:
            g_p = g_p + grad_weights.unsqueeze(1) / num_head
        else:
            g_p = g_p + grad_weights
    g_s = p * (g_p - (p * g_p).sum(-1, keepdim=True))
    if m is not None:
        g_s = g_s.masked_fill(m, 0.0)
    g_q = merge_heads(torch.matmul(g_s, k)) * c
    g_k = merge_heads(torch.matmul(g_s.transpose(-2, -1), q))
    g_query, g_wq, g_bq = _linear_grads(g_q, query, wq)
    g_key, g_wk, g_bk = _linear_grads(g_k, key, wk)
    g_value, g_wv, g_bv = _linear_grads(merge_heads(g_v), value, wv)
    return (
        g_query,
        g_key,
        g_value,
        torch.cat([g_wq, g_wk, g_wv]),
        torch.cat([g_bq, g_bk, g_bv]),
        g_proj_weight,
        g_proj_bias,
    )


def _layer_norm_grads(g, x, weight, bias, eps):
    _, mean, rstd = torch.native_layer_norm(x, [x.size(-1)], weight, bias, eps)
    return torch.ops.aten.native_layer_norm_backward(
        g, x, [x.size(-1)], mean, rstd, weight, bias, [True, True, True]
    )


def _ffn_grads(g, x, w1, b1, w2, use_gelu: bool):
    """Gradients (x, w1, b1, w2, b2) of ffn and its output."""
    h = torch.matmul(x, w1.t()) + b1
    a = torch.nn.functional.gelu(h) if use_gelu else torch.relu(h)
    g_a, g_w2, g_b2 = _linear_grads(g, a, w2)
    if use_gelu:
        g_h = torch.ops.aten.gelu_backward(g_a, h)
    else:
        g_h = torch.ops.aten.threshold_backward(g_a, h, 0)
    g_x, g_w1, g_b1 = _linear_grads(g_h, x, w1)
    return g_x, g_w1, g_b1, g_w2, g_b2


def transformer_encoder_layer_grads(
    grad,
    src,
    embed_dim: int,
    num_heads: int,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu: bool,
    norm_first: bool,
    eps: float,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask,
    mask_type,
) -> tuple:
    """Gradients (src, qkv_weight, qkv_bias, proj_weight, proj_bias, norm_weight_1,
    norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
    ffn_weight_2, ffn_bias_2) of `_transformer_encoder_layer_fwd`: the adjoint of
    `transformer_encoder_layer_tangent`, through the layer norms' and
    activations' backward ops."""
    # The parameters by block, in the order their gradients are returned.
    mha_params = (qkv_weight, qkv_bias, proj_weight, proj_bias)
    norm_params = (norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2)
    ffn_params = (ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2)
    if src.numel() == 0:
        params = (*mha_params, *norm_params, *ffn_params)
        return (grad.clone(), *(torch.zeros_like(p) for p in params))

    def mha(x):
        return torch.ops.aten._native_multi_head_attention(
            x, x, x, embed_dim, num_heads, *mha_params, mask, False, True, mask_type
        )[0]

    def mha_grads(g, x):
        gq, gk, gv, *gp = native_multi_head_attention_grads(
            g,
            None,
            x,
            x,
            x,
            embed_dim,
            num_heads,
            *mha_params,
            mask,
            False,
            True,
            mask_type,
        )
        return gq + gk + gv, gp

    if norm_first:
        n1 = torch.nn.functional.layer_norm(
            src, [embed_dim], norm_weight_1, norm_bias_1, eps
        )
        x1 = mha(n1) + src
        n2 = torch.nn.functional.layer_norm(
            x1, [embed_dim], norm_weight_2, norm_bias_2, eps
        )
        g_n2, g_fw1, g_fb1, g_fw2, g_fb2 = _ffn_grads(
            grad, n2, ffn_weight_1, ffn_bias_1, ffn_weight_2, use_gelu
        )
        g_x1_n, g_nw2, g_nb2 = _layer_norm_grads(
            g_n2, x1, norm_weight_2, norm_bias_2, eps
        )
        g_x1 = grad + g_x1_n
        g_n1, g_mha = mha_grads(g_x1, n1)
        g_src_n, g_nw1, g_nb1 = _layer_norm_grads(
            g_n1, src, norm_weight_1, norm_bias_1, eps
        )
        g_src = g_x1 + g_src_n
    else:
        r1 = mha(src) + src
        x1 = torch.nn.functional.layer_norm(
            r1, [embed_dim], norm_weight_1, norm_bias_1, eps
        )
        h = torch.matmul(x1, ffn_weight_1.t()) + ffn_bias_1
        a = torch.nn.functional.gelu(h) if use_gelu else torch.relu(h)
        r2 = torch.matmul(a, ffn_weight_2.t()) + ffn_bias_2 + x1
        g_r2, g_nw2, g_nb2 = _layer_norm_grads(
            grad, r2, norm_weight_2, norm_bias_2, eps
        )
        g_x1_f, g_fw1, g_fb1, g_fw2, g_fb2 = _ffn_grads(
            g_r2, x1, ffn_weight_1, ffn_bias_1, ffn_weight_2, use_gelu
        )
        g_r1, g_nw1, g_nb1 = _layer_norm_grads(
            g_r2 + g_x1_f, r1, norm_weight_1, norm_bias_1, eps
        )
        g_src_a, g_mha = mha_grads(g_r1, src)
        g_src = g_r1 + g_src_a
    return (g_src, *g_mha, g_nw1, g_nb1, g_nw2, g_nb2, g_fw1, g_fb1, g_fw2, g_fb2)
