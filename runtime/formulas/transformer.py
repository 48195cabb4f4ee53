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

__all__ = [
    "native_multi_head_attention_grads",
    "native_multi_head_attention_tangent",
    "transformer_encoder_layer_grads",
    "transformer_encoder_layer_tangent",
]


def _split_heads(x, num_head: int):
    """(B, T, D) -> (B, num_head, T, D / num_head)."""
    b, t, d = x.shape
    return x.reshape(b, t, num_head, d // num_head).transpose(1, 2)


def _merge_heads(x):
    """(B, h, T, dh) -> (B, T, h dh)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def _bool_mask(mask, mask_type, scores):
    """The kernel's mask as a boolean (True = masked) broadcastable to the scores:
    a key padding mask (mask_type 1) is (B, S), the others broadcast as they are."""
    if mask is None:
        return None
    m = mask.to(torch.bool)
    if mask_type == 1:
        m = m.reshape(scores.size(0), 1, 1, scores.size(-1))
    return m


def _mha_jvp(
    tangents,
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask,
    mask_type,
):
    """_native_multi_head_attention's attention output and probabilities, and their
    tangents: tangents = (query_t, key_t, value_t, qkv_weight_t, qkv_bias_t,
    proj_weight_t, proj_bias_t), all present (zeros for absent ones)."""
    query_t, key_t, value_t, w_t, b_t, wo_t, bo_t = tangents
    c = 1.0 / ((embed_dim // num_head) ** 0.5)
    wq, wk, wv = qkv_weight.chunk(3)
    bq, bk, bv = qkv_bias.chunk(3)
    wq_t, wk_t, wv_t = w_t.chunk(3)
    bq_t, bk_t, bv_t = b_t.chunk(3)
    q = _split_heads((torch.matmul(query, wq.t()) + bq) * c, num_head)
    k = _split_heads(torch.matmul(key, wk.t()) + bk, num_head)
    v = _split_heads(torch.matmul(value, wv.t()) + bv, num_head)
    q_t = _split_heads(
        (torch.matmul(query_t, wq.t()) + torch.matmul(query, wq_t.t()) + bq_t) * c,
        num_head,
    )
    k_t = _split_heads(
        torch.matmul(key_t, wk.t()) + torch.matmul(key, wk_t.t()) + bk_t, num_head
    )
    v_t = _split_heads(
        torch.matmul(value_t, wv.t()) + torch.matmul(value, wv_t.t()) + bv_t, num_head
    )
    s = torch.matmul(q, k.transpose(-2, -1))
    m = _bool_mask(mask, mask_type, s)
    if m is not None:
        s = s.masked_fill(m, float("-inf"))
    p = torch.softmax(s, -1)
    s_t = torch.matmul(q_t, k.transpose(-2, -1)) + torch.matmul(
        q, k_t.transpose(-2, -1)
    )
    ps_t = p * s_t
    if m is not None:
        ps_t = ps_t.masked_fill(m, 0.0)
    p_t = ps_t - p * ps_t.sum(-1, keepdim=True)
    ctx = _merge_heads(torch.matmul(p, v))
    ctx_t = _merge_heads(torch.matmul(p_t, v) + torch.matmul(p, v_t))
    out = torch.matmul(ctx, proj_weight.t()) + proj_bias
    out_t = torch.matmul(ctx_t, proj_weight.t()) + torch.matmul(ctx, wo_t.t()) + bo_t
    return out, out_t, p, p_t


def native_multi_head_attention_tangent(
    index: int,
    query_t,
    key_t,
    value_t,
    qkv_weight_t,
    qkv_bias_t,
    proj_weight_t,
    proj_bias_t,
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
):
    """The tangent of output 0 (the attention output, (B, T, D)) or output 1 (the
    attention weights: averaged over heads or not; None without need_weights) of
    `_native_multi_head_attention`: q = (query Wq^T + bq) / sqrt(D / h),
    k = key Wk^T + bk, v = value Wv^T + bv per head, P = softmax(q k^T) with the
    boolean mask, out = merge_heads(P v) Wo^T + bo, differentiated in the three
    inputs and the four parameters (all tangents present: zeros for absent)."""
    if index == 1 and not need_weights:
        return None
    if query.numel() == 0:
        return torch.zeros_like(query) if index == 0 else None
    _, out_t, _, p_t = _mha_jvp(
        (query_t, key_t, value_t, qkv_weight_t, qkv_bias_t, proj_weight_t, proj_bias_t),
        query,
        key,
        value,
        embed_dim,
        num_head,
        qkv_weight,
        qkv_bias,
        proj_weight,
        proj_bias,
        mask,
        mask_type,
    )
    if index == 0:
        return out_t
    if average_attn_weights:
        return p_t.mean(1)
    return p_t


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
    q = _split_heads((torch.matmul(query, wq.t()) + bq) * c, num_head)
    k = _split_heads(torch.matmul(key, wk.t()) + bk, num_head)
    v = _split_heads(torch.matmul(value, wv.t()) + bv, num_head)
    s = torch.matmul(q, k.transpose(-2, -1))
    m = _bool_mask(mask, mask_type, s)
    if m is not None:
        s = s.masked_fill(m, float("-inf"))
    p = torch.softmax(s, -1)
    ctx = _merge_heads(torch.matmul(p, v))
    g_p = torch.zeros_like(p)
    g_v = torch.zeros_like(v)
    g_proj_weight = torch.zeros_like(proj_weight)
    g_proj_bias = torch.zeros_like(proj_bias)
    if grad_output is not None:
        g_ctx, g_proj_weight, g_proj_bias = _linear_grads(grad_output, ctx, proj_weight)
        g_ctx = _split_heads(g_ctx, num_head)
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
    g_q = _merge_heads(torch.matmul(g_s, k)) * c
    g_k = _merge_heads(torch.matmul(g_s.transpose(-2, -1), q))
    g_query, g_wq, g_bq = _linear_grads(g_q, query, wq)
    g_key, g_wk, g_bk = _linear_grads(g_k, key, wk)
    g_value, g_wv, g_bv = _linear_grads(_merge_heads(g_v), value, wv)
    return (
        g_query,
        g_key,
        g_value,
        torch.cat([g_wq, g_wk, g_wv]),
        torch.cat([g_bq, g_bk, g_bv]),
        g_proj_weight,
        g_proj_bias,
    )


def _layer_norm_jvp(x, x_t, weight, weight_t, bias, bias_t, eps):
    """layer_norm over the last dim and its tangent."""
    y, mean, rstd = torch.native_layer_norm(x, [x.size(-1)], weight, bias, eps)
    xhat = (x - mean) * rstd
    xc_t = x_t - x_t.mean(-1, keepdim=True)
    xhat_t = rstd * (xc_t - xhat * (xhat * xc_t).mean(-1, keepdim=True))
    return y, xhat_t * weight + xhat * weight_t + bias_t


def _activation_derivative(h, use_gelu: bool):
    if use_gelu:
        cdf = 0.5 * (1.0 + torch.erf(h * (0.5**0.5)))
        pdf = (-0.5 * h * h).exp() * ((2.0 * torch.pi) ** -0.5)
        return cdf + h * pdf
    return (h > 0).to(h.dtype)


def _ffn_jvp(x, x_t, w1, w1_t, b1, b1_t, w2, w2_t, b2, b2_t, use_gelu: bool):
    h = torch.matmul(x, w1.t()) + b1
    h_t = torch.matmul(x_t, w1.t()) + torch.matmul(x, w1_t.t()) + b1_t
    a = torch.nn.functional.gelu(h) if use_gelu else torch.relu(h)
    a_t = _activation_derivative(h, use_gelu) * h_t
    return (
        torch.matmul(a, w2.t()) + b2,
        torch.matmul(a_t, w2.t()) + torch.matmul(a, w2_t.t()) + b2_t,
    )


def transformer_encoder_layer_tangent(
    src_t,
    qkv_weight_t,
    qkv_bias_t,
    proj_weight_t,
    proj_bias_t,
    norm_weight_1_t,
    norm_bias_1_t,
    norm_weight_2_t,
    norm_bias_2_t,
    ffn_weight_1_t,
    ffn_bias_1_t,
    ffn_weight_2_t,
    ffn_bias_2_t,
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
):
    """The tangent of `_transformer_encoder_layer_fwd` (the inference fast path of
    nn.TransformerEncoderLayer), in src and the twelve parameters (all tangents
    present: zeros for absent): with a = self-attention
    (`native_multi_head_attention_tangent`), LN the layer norms and
    ffn(x) = act(x W1^T + b1) W2^T + b2 (act gelu or relu),
    y = LN2(x1 + ffn(x1)), x1 = LN1(src + a(src)); or with norm_first
    y = x1 + ffn(LN2(x1)), x1 = src + a(LN1(src))."""
    if src.numel() == 0:
        return src_t.clone()
    mha_params = (qkv_weight, qkv_bias, proj_weight, proj_bias)
    mha_t = (qkv_weight_t, qkv_bias_t, proj_weight_t, proj_bias_t)
    ffn = (
        ffn_weight_1,
        ffn_weight_1_t,
        ffn_bias_1,
        ffn_bias_1_t,
        ffn_weight_2,
        ffn_weight_2_t,
        ffn_bias_2,
        ffn_bias_2_t,
        use_gelu,
    )
    if norm_first:
        n1, n1_t = _layer_norm_jvp(
            src, src_t, norm_weight_1, norm_weight_1_t, norm_bias_1, norm_bias_1_t, eps
        )
        a, a_t, _, _ = _mha_jvp(
            (n1_t, n1_t, n1_t) + mha_t,
            n1,
            n1,
            n1,
            embed_dim,
            num_heads,
            *mha_params,
            mask,
            mask_type,
        )
        x1, x1_t = a + src, a_t + src_t
        n2, n2_t = _layer_norm_jvp(
            x1, x1_t, norm_weight_2, norm_weight_2_t, norm_bias_2, norm_bias_2_t, eps
        )
        f, f_t = _ffn_jvp(n2, n2_t, *ffn)
        return f_t + x1_t
    a, a_t, _, _ = _mha_jvp(
        (src_t, src_t, src_t) + mha_t,
        src,
        src,
        src,
        embed_dim,
        num_heads,
        *mha_params,
        mask,
        mask_type,
    )
    x1, x1_t = _layer_norm_jvp(
        a + src,
        a_t + src_t,
        norm_weight_1,
        norm_weight_1_t,
        norm_bias_1,
        norm_bias_1_t,
        eps,
    )
    f, f_t = _ffn_jvp(x1, x1_t, *ffn)
    _, y_t = _layer_norm_jvp(
        f + x1,
        f_t + x1_t,
        norm_weight_2,
        norm_weight_2_t,
        norm_bias_2,
        norm_bias_2_t,
        eps,
    )
    return y_t


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
    if src.numel() == 0:
        zeros = [
            torch.zeros_like(t)
            for t in (
                qkv_weight,
                qkv_bias,
                proj_weight,
                proj_bias,
                norm_weight_1,
                norm_bias_1,
                norm_weight_2,
                norm_bias_2,
                ffn_weight_1,
                ffn_bias_1,
                ffn_weight_2,
                ffn_bias_2,
            )
        ]
        return (grad.clone(), *zeros)
    mha_params = (qkv_weight, qkv_bias, proj_weight, proj_bias)

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
