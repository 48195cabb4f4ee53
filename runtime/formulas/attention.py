"""Helpers for fused attention ops: the CPU flash-attention kernel and its backward,
written through attention's definition (softmax(q k^T * scale + mask) v).

`aten::_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p,
is_causal, attn_mask, scale)` takes query (B, H, L, E), key and value (B, Hk, S, E)
with H a multiple of Hk (grouped-query attention: each key/value head serves
H / Hk consecutive query heads), an additive float mask broadcastable to
(B, H, L, S) (2-d or 4-d), `is_causal` (the top-left lower triangle) and
`scale=None` meaning 1/sqrt(E). With S = scale q k^T + mask (-inf above the
diagonal when causal), it returns out = P v and logsumexp = logsumexp_j S, where
P = exp(S - logsumexp); a row masked everywhere gets out = 0 and logsumexp = 0,
so P = exp(S - logsumexp) is 0 there, as the kernel's own backward assumes. The
helpers recompute P from the op's logsumexp the same way, in float32 for
bfloat16 and float16 (the kernel's accumulation type).

Dropout draws random numbers inside the kernel, so the op has no derivative
for dropout_p > 0: every helper refuses it (the forward kernel refuses it too;
the backward kernel silently ignores it).

The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer
have their helpers in `transformer`.
"""

from __future__ import annotations

import torch

__all__ = [
    "flash_attention_backward_grads",
    "flash_attention_backward_tangent",
    "flash_attention_grads",
    "flash_attention_tangent",
]


def _check_dropout(dropout_p):
    if dropout_p != 0.0:
        raise RuntimeError(
            "dualgen: _scaled_dot_product_flash_attention_for_cpu with dropout_p="
            f"{dropout_p} draws random numbers inside the kernel: it has no "
            "derivative; only dropout_p=0 is differentiable"
        )


def _acc(t):
    """t in the kernel's accumulation dtype (float32 for bfloat16 and float16)."""
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.float()
    return t


def _expand_heads(t, heads: int):
    """Key/value heads repeated for the query heads they serve (grouped-query)."""
    if t.size(1) == heads:
        return t
    return t.repeat_interleave(heads // t.size(1), 1)


def _sum_heads(t, heads: int):
    """The adjoint of `_expand_heads`: sum over the query heads of each group."""
    if t.size(1) == heads:
        return t
    b, h, s, e = t.shape
    return t.reshape(b, heads, h // heads, s, e).sum(2)


def _unbroadcast_mask(g, mask):
    """The adjoint of broadcasting `mask` to g's (B, H, L, S) shape."""
    if mask.dim() == 2:
        return g.sum((0, 1)).sum_to_size(mask.shape)
    return g.sum_to_size(mask.shape)


def _scale_of(query, scale):
    if scale is None:
        return 1.0 / (query.size(-1) ** 0.5)
    return scale


def _probabilities(q, kk, attn_mask, logsumexp, is_causal, scale):
    """P = exp(scale q kk^T + mask - logsumexp) (0 where masked), accumulation dtype."""
    s = torch.matmul(q, kk.transpose(-2, -1)) * scale
    if attn_mask is not None:
        s = s + _acc(attn_mask)
    if is_causal:
        keep = torch.ones(
            s.size(-2), s.size(-1), dtype=torch.bool, device=s.device
        ).tril()
        s = s.masked_fill(keep.logical_not(), float("-inf"))
    return (s - _acc(logsumexp).unsqueeze(-1)).exp()


def flash_attention_tangent(
    index: int,
    query_t,
    key_t,
    value_t,
    attn_mask_t,
    query,
    key,
    value,
    attn_mask,
    output,
    logsumexp,
    dropout_p,
    is_causal,
    scale,
):
    """The tangent of output (index 0) or logsumexp (index 1) of
    `_scaled_dot_product_flash_attention_for_cpu`. With
    dS = scale (q_t k^T + q k_t^T) + mask_t and P the attention probabilities:
    logsumexp_t = sum_j P dS and output_t = (P (dS - logsumexp_t)) v + P v_t.
    attn_mask_t may be None (no mask, or a mask without tangent)."""
    _check_dropout(dropout_p)
    heads = query.size(1)
    sc = _scale_of(query, scale)
    q = _acc(query)
    kk = _expand_heads(_acc(key), heads)
    p = _probabilities(q, kk, attn_mask, logsumexp, is_causal, sc)
    ds = (
        torch.matmul(_acc(query_t), kk.transpose(-2, -1))
        + torch.matmul(q, _expand_heads(_acc(key_t), heads).transpose(-2, -1))
    ) * sc
    if attn_mask_t is not None:
        ds = ds + _acc(attn_mask_t)
    pds = p * ds
    lse_t = pds.sum(-1)
    if index == 1:
        return lse_t.to(logsumexp.dtype)
    vv = _expand_heads(_acc(value), heads)
    out_t = torch.matmul(pds - p * lse_t.unsqueeze(-1), vv) + torch.matmul(
        p, _expand_heads(_acc(value_t), heads)
    )
    return out_t.to(output.dtype)


def flash_attention_grads(
    grad_output,
    grad_logsumexp,
    query,
    key,
    value,
    attn_mask,
    output,
    logsumexp,
    dropout_p,
    is_causal,
    scale,
) -> tuple:
    """Gradients (query, key, value, attn_mask) of
    `_scaled_dot_product_flash_attention_for_cpu` from those of output and
    logsumexp (None where absent): with gS = P (g_out v^T - rowsum(g_out out)
    + g_lse), query's is scale gS k, key's scale gS^T q and value's P^T g_out
    (summed over each key/value head's query heads), the mask's gS summed to its
    shape (None without a mask)."""
    _check_dropout(dropout_p)
    heads = query.size(1)
    sc = _scale_of(query, scale)
    q = _acc(query)
    kk = _expand_heads(_acc(key), heads)
    p = _probabilities(q, kk, attn_mask, logsumexp, is_causal, sc)
    gs = torch.zeros_like(p)
    gvv = None
    if grad_output is not None:
        g = _acc(grad_output)
        vv = _expand_heads(_acc(value), heads)
        dp = torch.matmul(g, vv.transpose(-2, -1))
        d = (g * _acc(output)).sum(-1, keepdim=True)
        gs = p * (dp - d)
        gvv = torch.matmul(p.transpose(-2, -1), g)
    if grad_logsumexp is not None:
        gs = gs + p * _acc(grad_logsumexp).unsqueeze(-1)
    gq = (torch.matmul(gs, kk) * sc).to(query.dtype)
    gk = _sum_heads(torch.matmul(gs.transpose(-2, -1), q) * sc, key.size(1))
    if gvv is None:
        gv = torch.zeros_like(value)
    else:
        gv = _sum_heads(gvv, value.size(1)).to(value.dtype)
    gm = None
    if attn_mask is not None:
        gm = _unbroadcast_mask(gs, attn_mask).to(attn_mask.dtype)
    return gq, gk.to(key.dtype), gv, gm


def _backward_parts(
    grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
):
    heads = query.size(1)
    sc = _scale_of(query, scale)
    g = _acc(grad_out)
    q = _acc(query)
    kk = _expand_heads(_acc(key), heads)
    vv = _expand_heads(_acc(value), heads)
    p = _probabilities(q, kk, attn_mask, logsumexp, is_causal, sc)
    dp = torch.matmul(g, vv.transpose(-2, -1))
    d = (g * _acc(out)).sum(-1, keepdim=True)
    return heads, sc, g, q, kk, vv, p, dp - d


def flash_attention_backward_tangent(
    index: int,
    grad_out_t,
    query_t,
    key_t,
    value_t,
    out_t,
    logsumexp_t,
    attn_mask_t,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    attn_mask,
    dropout_p,
    is_causal,
    scale,
):
    """The tangent of grad_query (index 0), grad_key (1) or grad_value (2) of
    `_scaled_dot_product_flash_attention_for_cpu_backward`, a function of all
    its tensor inputs (out and logsumexp included, as the kernel reads them):
    with P = exp(S - logsumexp), dS = P (g v^T - rowsum(g out)), it returns
    scale dS k, scale dS^T q and P^T g, differentiated in every input.
    attn_mask_t may be None."""
    _check_dropout(dropout_p)
    heads, sc, g, q, kk, vv, p, r = _backward_parts(
        grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
    )
    qt = _acc(query_t)
    kkt = _expand_heads(_acc(key_t), heads)
    s_t = (
        torch.matmul(qt, kk.transpose(-2, -1)) + torch.matmul(q, kkt.transpose(-2, -1))
    ) * sc
    if attn_mask_t is not None:
        s_t = s_t + _acc(attn_mask_t)
    p_t = p * (s_t - _acc(logsumexp_t).unsqueeze(-1))
    gt = _acc(grad_out_t)
    if index == 2:
        res = torch.matmul(p_t.transpose(-2, -1), g) + torch.matmul(
            p.transpose(-2, -1), gt
        )
        return _sum_heads(res, value.size(1)).to(value.dtype)
    vvt = _expand_heads(_acc(value_t), heads)
    r_t = torch.matmul(gt, vv.transpose(-2, -1)) + torch.matmul(
        g, vvt.transpose(-2, -1)
    )
    r_t = r_t - (gt * _acc(out) + g * _acc(out_t)).sum(-1, keepdim=True)
    ds = p * r
    ds_t = p_t * r + p * r_t
    if index == 0:
        res = (torch.matmul(ds_t, kk) + torch.matmul(ds, kkt)) * sc
        return res.to(query.dtype)
    res = (
        torch.matmul(ds_t.transpose(-2, -1), q) + torch.matmul(ds.transpose(-2, -1), qt)
    ) * sc
    return _sum_heads(res, key.size(1)).to(key.dtype)


def flash_attention_backward_grads(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    attn_mask,
    dropout_p,
    is_causal,
    scale,
) -> tuple:
    """Gradients (grad_out, query, key, value, out, logsumexp, attn_mask) of
    `_scaled_dot_product_flash_attention_for_cpu_backward` from those of its
    outputs (grad_query, grad_key, grad_value; None where absent): the adjoint
    of `flash_attention_backward_tangent`. The mask's is None without a mask."""
    _check_dropout(dropout_p)
    heads, sc, g, q, kk, vv, p, r = _backward_parts(
        grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
    )
    ds = p * r
    a = None if grad_grad_query is None else _acc(grad_grad_query)
    b = None if grad_grad_key is None else _expand_heads(_acc(grad_grad_key), heads)
    c = None if grad_grad_value is None else _expand_heads(_acc(grad_grad_value), heads)
    gds = torch.zeros_like(p)
    gq = torch.zeros_like(q)
    gkk = torch.zeros_like(kk)
    if a is not None:
        gds = gds + torch.matmul(a, kk.transpose(-2, -1)) * sc
        gkk = gkk + torch.matmul(ds.transpose(-2, -1), a) * sc
    if b is not None:
        gds = gds + torch.matmul(q, b.transpose(-2, -1)) * sc
        gq = gq + torch.matmul(ds, b) * sc
    gp = gds * r
    gg = torch.zeros_like(g)
    if c is not None:
        gp = gp + torch.matmul(g, c.transpose(-2, -1))
        gg = gg + torch.matmul(p, c)
    gr = gds * p
    gd = -gr.sum(-1, keepdim=True)
    gg = gg + torch.matmul(gr, vv) + gd * _acc(out)
    gvv = torch.matmul(gr.transpose(-2, -1), g)
    gout = gd * g
    gs = gp * p
    glse = -gs.sum(-1)
    gq = gq + torch.matmul(gs, kk) * sc
    gkk = gkk + torch.matmul(gs.transpose(-2, -1), q) * sc
    gm = None
    if attn_mask is not None:
        gm = _unbroadcast_mask(gs, attn_mask).to(attn_mask.dtype)
    return (
        gg.to(grad_out.dtype),
        gq.to(query.dtype),
        _sum_heads(gkk, key.size(1)).to(key.dtype),
        _sum_heads(gvv, value.size(1)).to(value.dtype),
        gout.to(out.dtype),
        glse.to(logsumexp.dtype),
        gm,
    )
