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

The device kernels behind scaled_dot_product_attention and their backward kernels
read the same helpers (logsumexp in each kernel's layout: `attention_rows`). The
lower kernels libraries call directly (varlen, masks aligned to the bottom-right
corner) have theirs in `attention_lower`; the inference fast paths of
nn.MultiheadAttention and nn.TransformerEncoderLayer theirs in `transformer`.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    attention_acc,
    attention_probabilities,
    attention_rows,
    attention_rows_like,
    attention_rows_logsumexp,
    attention_scale,
    expand_heads,
    finite_rows,
    sum_heads,
)
from dualgen.helper_basics import refuse_dropout

__all__ = [
    "device_attention_backward_grads",
    "device_attention_backward_grads_with_bias",
    "device_attention_grads",
    "flash_attention_backward_grads",
    "flash_attention_grads",
]


def _check_dropout(dropout_p):
    refuse_dropout(dropout_p, "_scaled_dot_product_flash_attention_for_cpu")


def _unbroadcast_mask(g, mask):
    """The adjoint of broadcasting `mask` to g's (B, H, L, S) shape."""
    if mask.dim() == 2:
        return g.sum((0, 1)).sum_to_size(mask.shape)
    return g.sum_to_size(mask.shape)


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
    sc = attention_scale(query, scale)
    q = attention_acc(query)
    kk = expand_heads(attention_acc(key), heads)
    p = attention_probabilities(q, kk, attn_mask, logsumexp, is_causal, sc)
    gs = torch.zeros_like(p)
    gvv = None
    if grad_output is not None:
        g = attention_acc(grad_output)
        vv = expand_heads(attention_acc(value), heads)
        dp = torch.matmul(g, vv.transpose(-2, -1))
        d = (g * attention_acc(output)).sum(-1, keepdim=True)
        gs = p * (dp - d)
        gvv = torch.matmul(p.transpose(-2, -1), g)
    if grad_logsumexp is not None:
        gs = gs + p * attention_acc(grad_logsumexp).unsqueeze(-1)
    gq = (torch.matmul(gs, kk) * sc).to(query.dtype)
    gk = sum_heads(torch.matmul(gs.transpose(-2, -1), q) * sc, key.size(1))
    if gvv is None:
        gv = torch.zeros_like(value)
    else:
        gv = sum_heads(gvv, value.size(1)).to(value.dtype)
    gm = None
    if attn_mask is not None:
        gm = _unbroadcast_mask(gs, attn_mask).to(attn_mask.dtype)
    return gq, gk.to(key.dtype), gv, gm


def _backward_parts(
    grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
):
    heads = query.size(1)
    sc = attention_scale(query, scale)
    g = attention_acc(grad_out)
    q = attention_acc(query)
    kk = expand_heads(attention_acc(key), heads)
    vv = expand_heads(attention_acc(value), heads)
    p = attention_probabilities(q, kk, attn_mask, logsumexp, is_causal, sc)
    dp = torch.matmul(g, vv.transpose(-2, -1))
    d = (g * attention_acc(out)).sum(-1, keepdim=True)
    return heads, sc, g, q, kk, vv, p, dp - d


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
    grad_grad_mask=None,
) -> tuple:
    """Gradients (grad_out, query, key, value, out, logsumexp, attn_mask) of
    `_scaled_dot_product_flash_attention_for_cpu_backward` from those of its
    outputs (grad_query, grad_key, grad_value; None where absent): the adjoint
    of `flash_attention_backward_tangent`. The mask's is None without a mask.
    `grad_grad_mask` is the gradient of a backward that also returns the mask's
    gradient (dS summed to the mask's shape: efficient attention's)."""
    _check_dropout(dropout_p)
    heads, sc, g, q, kk, vv, p, r = _backward_parts(
        grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
    )
    ds = p * r
    a = None if grad_grad_query is None else attention_acc(grad_grad_query)
    b = (
        None
        if grad_grad_key is None
        else expand_heads(attention_acc(grad_grad_key), heads)
    )
    c = (
        None
        if grad_grad_value is None
        else expand_heads(attention_acc(grad_grad_value), heads)
    )
    gds = torch.zeros_like(p)
    if grad_grad_mask is not None:
        gds = gds + attention_acc(grad_grad_mask)
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
    gg = gg + torch.matmul(gr, vv) + gd * attention_acc(out)
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
        sum_heads(gkk, key.size(1)).to(key.dtype),
        sum_heads(gvv, value.size(1)).to(value.dtype),
        gout.to(out.dtype),
        glse.to(logsumexp.dtype),
        gm,
    )


def device_attention_grads(
    grad_output,
    grad_logsumexp,
    query,
    key,
    value,
    attn_bias,
    output,
    logsumexp,
    dropout_p,
    is_causal,
    scale,
) -> tuple:
    """Gradients (query, key, value, attn_bias) of the device attention kernels
    scaled_dot_product_attention dispatches to (CUDA flash, efficient, cuDNN), as
    `flash_attention_grads`, whatever layout the kernel gives logsumexp
    (`attention_rows`: padded rows, a trailing 1, or none computed)."""
    refuse_dropout(dropout_p, "scaled_dot_product_attention's device kernels")
    rows = attention_rows_logsumexp(
        logsumexp, query, key, value, attn_bias, is_causal, scale
    )
    grad_rows = attention_rows(grad_logsumexp, query.size(2))
    return flash_attention_grads(
        grad_output,
        grad_rows,
        query,
        key,
        value,
        attn_bias,
        output,
        rows,
        0.0,
        is_causal,
        scale,
    )


def device_attention_backward_grads_with_bias(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_grad_bias,
    grad_out,
    query,
    key,
    value,
    attn_bias,
    out,
    logsumexp,
    dropout_p,
    is_causal,
    scale,
) -> tuple:
    """Gradients (grad_out, query, key, value, attn_bias, out, logsumexp) of the
    device attention kernels' backward ops from those of their outputs
    (grad_query, grad_key, grad_value and, for efficient attention, the bias's
    gradient; None where absent): `flash_attention_backward_grads` with
    logsumexp read as (B, H, L) rows from the kernel's layout and its gradient
    written back in that layout (padded rows and cuDNN's trailing 1 get none).
    attn_bias may be None (its gradient then None)."""
    refuse_dropout(dropout_p, "scaled_dot_product_attention's device kernels")
    rows = finite_rows(attention_rows(logsumexp, query.size(2)))
    g_out, gq, gk, gv, g_o, g_rows, g_bias = flash_attention_backward_grads(
        grad_grad_query,
        grad_grad_key,
        grad_grad_value,
        grad_out,
        query,
        key,
        value,
        out,
        rows,
        attn_bias,
        0.0,
        is_causal,
        scale,
        grad_grad_mask=grad_grad_bias,
    )
    g_lse = attention_rows_like(g_rows, logsumexp)
    return g_out, gq, gk, gv, g_bias, g_o, g_lse


def device_attention_backward_grads(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    dropout_p,
    is_causal,
    scale,
) -> tuple:
    """Gradients (grad_out, query, key, value, out, logsumexp) of the device
    kernels' backward ops without a bias (flash's):
    `device_attention_backward_grads_with_bias` without one."""
    grads = device_attention_backward_grads_with_bias(
        grad_grad_query,
        grad_grad_key,
        grad_grad_value,
        None,
        grad_out,
        query,
        key,
        value,
        None,
        out,
        logsumexp,
        dropout_p,
        is_causal,
        scale,
    )
    return grads[:4] + grads[5:]
