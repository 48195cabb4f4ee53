"""Reference CPU kernels of the attention kernels, for the tests only.

The attention kernels that torch.nn.functional.scaled_dot_product_attention
dispatches to on CUDA:

- `_scaled_dot_product_flash_attention`: output laid out as (B, L, H, E) memory
  seen as (B, H, L, E), logsumexp (B, H, L) in float32, the sequence outputs empty
  and max_q, max_k the lengths;
- `_scaled_dot_product_efficient_attention`: an additive attn_bias, logsumexp
  (B, H, L rounded up to a multiple of 32) in float32 when compute_log_sumexp,
  else (B, H, 0);
- `_scaled_dot_product_cudnn_attention`: logsumexp (B, H, L, 1) in float32 when
  compute_log_sumexp.

Their backward kernels (`attention_backward`: from out and logsumexp as given,
rows of logsumexp read from each layout), which autograd calls for them. The
kernels below them, which libraries call directly, are in `attention_lower`.

logsumexp is float64 for float64 inputs (the device kernels take no float64;
here gradcheck does). Padding rows hold zeros (constants: finite differences see
none of them move).
A row masked everywhere gives out 0 and logsumexp 0, as the CPU flash kernel does.
"""

from __future__ import annotations

import math

import torch

from .common import check_real_floating, empty, lse_dtype

ALIGN_EFFICIENT_LSE = 32


def _attention(query, key, value, bias, is_causal, scale, dropout_p=0.0):
    """(out (B, L, H, E) memory seen as (B, H, L, E), logsumexp (B, H, L)) by the
    definition, in float64; real floating dtypes only, as the kernels."""
    if not query.is_floating_point():
        raise RuntimeError(f"attention: not implemented for '{query.dtype}'")
    heads, kv_heads = query.size(1), key.size(1)
    q, k, v = (t.double() for t in (query, key, value))
    if kv_heads != heads:  # grouped-query attention
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    s = scale * q @ k.transpose(-2, -1)
    if bias is not None:
        s = s + bias.double()
    if is_causal:
        L, S = s.shape[-2:]
        above = torch.ones(L, S, dtype=torch.bool).triu(1)
        s = s.masked_fill(above, -math.inf)
    lse = torch.logsumexp(s, -1)
    lse = lse.masked_fill(torch.isneginf(lse), 0.0)
    p = torch.exp(s - lse.unsqueeze(-1))
    if dropout_p:  # the device kernels draw the mask inside, from their own state
        p = p * (torch.rand_like(p) >= dropout_p) / (1 - dropout_p)
    out = p @ v
    memory = out.transpose(1, 2).contiguous().to(query.dtype)
    return memory.transpose(1, 2), lse


def _with_sequence_outputs(out, lse, query, key):
    """flash's and cuDNN's nine outputs: out and logsumexp, then the (empty)
    cumulative sequence lengths, the lengths, the (empty) generator state and
    debug mask."""
    empty_int = empty(torch.int32)
    lengths = (query.size(2), key.size(2))
    return (
        out,
        lse,
        empty_int,
        empty_int.clone(),
        *lengths,
        empty(),
        empty(),
        empty(query.dtype),
    )


def flash(
    query,
    key,
    value,
    dropout_p=0.0,
    is_causal=False,
    return_debug_mask=False,
    *,
    scale=None,
):
    out, lse = _attention(query, key, value, None, is_causal, scale, dropout_p)
    return _with_sequence_outputs(out, lse.to(lse_dtype(query)), query, key)


def efficient(
    query,
    key,
    value,
    attn_bias,
    compute_log_sumexp,
    dropout_p=0.0,
    is_causal=False,
    *,
    scale=None,
):
    out, lse = _attention(query, key, value, attn_bias, is_causal, scale, dropout_p)
    B, H, L = lse.shape
    rows = (
        -(-L // ALIGN_EFFICIENT_LSE) * ALIGN_EFFICIENT_LSE if compute_log_sumexp else 0
    )
    padded = torch.zeros((B, H, rows), dtype=lse_dtype(query))
    padded[:, :, : min(rows, L)] = lse[:, :, : min(rows, L)]
    return out, padded, empty(), empty()


def cudnn(
    query,
    key,
    value,
    attn_bias,
    compute_log_sumexp,
    dropout_p=0.0,
    is_causal=False,
    return_debug_mask=False,
    *,
    scale=None,
):
    out, lse = _attention(query, key, value, attn_bias, is_causal, scale, dropout_p)
    if compute_log_sumexp:
        stats = lse.unsqueeze(-1).to(lse_dtype(query))
    else:
        stats = torch.empty(0, dtype=lse_dtype(query))
    return _with_sequence_outputs(out, stats, query, key)


def attention_backward(grad_out, query, key, value, out, rows, bias, is_causal, scale):
    """(grad_query, grad_key, grad_value, dS) of attention's backward kernels, from
    out and the (B, H, L) logsumexp rows as given (P = exp(S - rows)), in float64:
    dS = P (grad_out v^T - rowsum(grad_out out)); grad_query = scale dS k,
    grad_key = scale dS^T q, grad_value = P^T grad_out, each key/value head's
    summed over the query heads it serves."""
    heads, kv_heads = query.size(1), key.size(1)
    g, q, k, v, o = (t.double() for t in (grad_out, query, key, value, out))
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    s = scale * q @ k.transpose(-2, -1)
    if bias is not None:
        s = s + bias.double()
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), -math.inf)
    rows = rows.double().masked_fill(~rows.isfinite(), 0.0)
    p = torch.exp(s - rows.unsqueeze(-1))
    ds = p * (g @ v.transpose(-2, -1) - (g * o).sum(-1, keepdim=True))

    def per_kv_head(t):
        B, _, S, E = t.shape
        return t.reshape(B, kv_heads, heads // kv_heads, S, E).sum(2)

    grads = (
        scale * ds @ k,
        per_kv_head(scale * ds.transpose(-2, -1) @ q),
        per_kv_head(p.transpose(-2, -1) @ g),
    )
    return tuple(g_.to(t.dtype) for g_, t in zip(grads, (query, key, value))) + (ds,)


def flash_backward(
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    """`_scaled_dot_product_flash_attention_backward` (dropout_p 0 only)."""
    check_real_floating("_scaled_dot_product_flash_attention_backward", query)
    return attention_backward(
        grad_out, query, key, value, out, logsumexp, None, is_causal, scale
    )[:3]


def efficient_backward(
    grad_out,
    query,
    key,
    value,
    attn_bias,
    out,
    logsumexp,
    philox_seed,
    philox_offset,
    dropout_p,
    grad_input_mask,
    is_causal=False,
    *,
    scale=None,
):
    """`_scaled_dot_product_efficient_attention_backward`: logsumexp's rows padded
    to a multiple of 32; the bias's gradient (dS summed to its shape) where the
    mask asks for it."""
    check_real_floating("_scaled_dot_product_efficient_attention_backward", query)
    rows = logsumexp[..., : query.size(2)]
    gq, gk, gv, ds = attention_backward(
        grad_out, query, key, value, out, rows, attn_bias, is_causal, scale
    )
    g_bias = None
    if grad_input_mask[3] and attn_bias is not None:
        g_bias = ds.sum_to_size(attn_bias.shape).to(attn_bias.dtype)
    return gq, gk, gv, g_bias


def cudnn_backward(
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    philox_seed,
    philox_offset,
    attn_bias,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    *,
    scale=None,
):
    """`_scaled_dot_product_cudnn_attention_backward`: logsumexp (B, H, L, 1)."""
    check_real_floating("_scaled_dot_product_cudnn_attention_backward", query)
    return attention_backward(
        grad_out,
        query,
        key,
        value,
        out,
        logsumexp.squeeze(-1),
        attn_bias,
        is_causal,
        scale,
    )[:3]


KERNELS = {
    "_scaled_dot_product_flash_attention": flash,
    "_scaled_dot_product_efficient_attention": efficient,
    "_scaled_dot_product_cudnn_attention": cudnn,
    "_scaled_dot_product_flash_attention_backward": flash_backward,
    "_scaled_dot_product_efficient_attention_backward": efficient_backward,
    "_scaled_dot_product_cudnn_attention_backward": cudnn_backward,
}
