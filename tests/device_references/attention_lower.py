"""Reference CPU kernels of the lower attention kernels, which libraries call
directly, for the tests only (the kernels behind scaled_dot_product_attention are
in `attention`):

- `_flash_attention_forward`: (B, L, H, E) in and out, logsumexp (B, H, L); or
  packed sequences (total, H, E) with cumulative offsets, logsumexp (H, total);
  causal masks and sliding windows aligned to the bottom-right corner, ALiBi; a
  row that sees no key gets out 0 and logsumexp +inf, as the flash kernels write
  it;
- `_efficient_attention_forward`: the same layouts, an additive bias,
  custom_mask_type 0, 1 (causal from the top-left) or 2 (from the bottom-right),
  logsumexp padded per sequence;
- their backward kernels (`_flash_attention_backward`,
  `_efficient_attention_backward`): `attention_backward` per sequence, out and
  logsumexp as given, the masks made an additive bias.

logsumexp is float64 for float64 inputs (the device kernels take no float64;
here gradcheck does).
"""

from __future__ import annotations

import math

import torch

from .attention import ALIGN_EFFICIENT_LSE, attention_backward
from .common import check_real_floating, empty, lse_dtype


def _seen(L, S, causal, top_left, window_left, window_right):
    """(L, S) booleans: key j is seen by query i. With d = j - (i + S - L): d <= 0
    when causal (j <= i when top_left), d <= window_right and d >= -window_left
    (None or negative: no bound)."""
    d = torch.arange(S).unsqueeze(0) - torch.arange(L).unsqueeze(1) - (S - L)
    seen = torch.ones(L, S, dtype=torch.bool)
    if causal:
        seen &= (
            (torch.arange(S) <= torch.arange(L).unsqueeze(1)) if top_left else d <= 0
        )
    if not causal and window_right is not None and window_right >= 0:
        seen &= d <= window_right
    if window_left is not None and window_left >= 0:
        seen &= d >= -window_left
    return seen


def _aligned_sequence(
    q,
    k,
    v,
    scale,
    causal,
    top_left,
    window_left,
    window_right,
    slopes,
    bias,
    dropout_p=0.0,
):
    """One sequence of the lower attention kernels, q (L, H, E) and k, v (S, Hk,
    E): (out (L, H, E), logsumexp (H, L) in float64). With d = j - (i + S - L),
    key j is seen by query i where d <= 0 when causal (j <= i when top_left),
    d <= window_right and d >= -window_left (None or negative: no bound); ALiBi
    slopes (H) score -slope |d|; bias (H, L, S) is added. A row that sees no key:
    out 0 and logsumexp +inf, as the flash kernels write it."""
    heads = q.size(1)
    q, k, v = (t.double().transpose(0, 1) for t in (q, k, v))
    k = k.repeat_interleave(heads // k.size(0), 0)
    v = v.repeat_interleave(heads // v.size(0), 0)
    L, S = q.size(1), k.size(1)
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    s = scale * q @ k.transpose(-2, -1)
    if bias is not None:
        s = s + bias.double()
    d = torch.arange(S).unsqueeze(0) - torch.arange(L).unsqueeze(1) - (S - L)
    seen = _seen(L, S, causal, top_left, window_left, window_right)
    if slopes is not None:
        s = s - slopes.double().view(-1, 1, 1) * d.abs()
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, -1)
    lse = lse.masked_fill(torch.isneginf(lse), math.inf)
    p = torch.exp(s - lse.unsqueeze(-1))
    if dropout_p:  # the device kernels draw the mask inside, from their own state
        p = p * (torch.rand_like(p) >= dropout_p) / (1 - dropout_p)
    return (p @ v).transpose(0, 1), lse


def _segments(cumulative, count):
    """(start, end) of each packed sequence from cumulative offsets."""
    offsets = cumulative.tolist()
    return [(offsets[b], offsets[b + 1]) for b in range(count)]


def flash_forward(
    query,
    key,
    value,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    return_debug_mask,
    *,
    scale=None,
    window_size_left=None,
    window_size_right=None,
    seqused_k=None,
    alibi_slopes=None,
    block_table=None,
    num_splits=None,
):
    """`_flash_attention_forward`: (B, L, H, E) in, out (B, L, H, E) and
    logsumexp (B, H, L); or packed (total, H, E) with cum_seq_q / cum_seq_k
    offsets, seqused_k the keys each sequence uses, logsumexp (H, total). Masks
    aligned to the bottom-right corner (`_aligned_sequence`)."""
    check_real_floating("_flash_attention_forward", query)
    if block_table is not None:
        raise RuntimeError("the reference takes no paged key/value cache")
    window = (window_size_left, window_size_right)

    def slopes(b):
        if alibi_slopes is None or alibi_slopes.dim() == 1:
            return alibi_slopes
        return alibi_slopes[b]

    if cum_seq_q is None:
        parts = [
            _aligned_sequence(
                query[b],
                key[b],
                value[b],
                scale,
                is_causal,
                False,
                *window,
                slopes(b),
                None,
            )
            for b in range(query.size(0))
        ]
        out = torch.stack([o for o, _ in parts])
        lse = torch.stack([r for _, r in parts])
    else:
        out = torch.zeros(query.shape[:2] + value.shape[-1:], dtype=torch.float64)
        lse = torch.zeros(query.size(1), query.size(0), dtype=torch.float64)
        count = cum_seq_q.numel() - 1
        keys = _segments(cum_seq_k, count)
        for b, (q0, q1) in enumerate(_segments(cum_seq_q, count)):
            k0, k1 = keys[b]
            if seqused_k is not None:
                k1 = k0 + int(seqused_k[b])
            o, r = _aligned_sequence(
                query[q0:q1],
                key[k0:k1],
                value[k0:k1],
                scale,
                is_causal,
                False,
                *window,
                slopes(b),
                None,
                dropout_p,
            )
            out[q0:q1], lse[:, q0:q1] = o, r
    return (
        out.to(query.dtype),
        lse.to(lse_dtype(query)),
        torch.zeros(2, dtype=torch.int64),
        torch.zeros((), dtype=torch.int64),
        empty(query.dtype),
    )


def efficient_forward(
    query,
    key,
    value,
    bias,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p,
    custom_mask_type,
    compute_log_sumexp=False,
    *,
    scale=None,
    seqlen_k=None,
    window_size=None,
):
    """`_efficient_attention_forward`: (B, M, H, K) in, out (B, M, H, K), an
    additive bias (B, H, M, N), custom_mask_type 0 (none), 1 (causal from the
    top-left corner) or 2 (from the bottom-right); logsumexp (B, H, M rounded up to
    a multiple of 32; zeros past M) when compute_log_sumexp, else (B, H, 0). Packed
    sequences (B = 1, cu_seqlens_q / cu_seqlens_k offsets): one row of logsumexp
    per sequence."""
    check_real_floating("_efficient_attention_forward", query)
    if seqlen_k is not None or window_size is not None:
        raise RuntimeError("the reference takes no seqlen_k or window_size")
    causal, top_left = custom_mask_type != 0, custom_mask_type == 1
    out = torch.zeros(query.shape[:3] + value.shape[-1:], dtype=torch.float64)
    if cu_seqlens_q is None:
        B, M, N = query.size(0), query.size(1), key.size(1)
        spans = [(b, (0, M), (0, N)) for b in range(B)]
        max_q, max_k = M, N
    else:
        count = cu_seqlens_q.numel() - 1
        spans = list(
            zip(
                [0] * count,
                _segments(cu_seqlens_q, count),
                _segments(cu_seqlens_k, count),
            )
        )
        max_q, max_k = max_seqlen_q, max_seqlen_k
    rows = -(-max_q // ALIGN_EFFICIENT_LSE) * ALIGN_EFFICIENT_LSE
    lse = torch.zeros(len(spans), query.size(2), rows if compute_log_sumexp else 0)
    lse = lse.double()
    for row, (b, (q0, q1), (k0, k1)) in enumerate(spans):
        b_bias = None
        if bias is not None:
            b_bias = bias.expand(query.size(0), query.size(2), q1 - q0, k1 - k0)[b]
        o, r = _aligned_sequence(
            query[b, q0:q1],
            key[b, k0:k1],
            value[b, k0:k1],
            scale,
            causal,
            top_left,
            None,
            None,
            None,
            b_bias,
            dropout_p,
        )
        out[b, q0:q1] = o
        if compute_log_sumexp:
            lse[row, :, : q1 - q0] = r
    return (
        out.to(query.dtype),
        lse.to(lse_dtype(query)),
        torch.zeros((), dtype=torch.int64),
        torch.zeros((), dtype=torch.int64),
        max_q,
        max_k,
    )


def _aligned_backward(grad_out, query, key, value, out, rows, bias, masks, scale):
    """(grad_query, grad_key, grad_value, dS) of one batch in (B, H, L, E) layout,
    out and rows (B, H, L) as given, `masks` (causal, top_left, window_left,
    window_right) as `_seen` says them, made an additive bias."""
    L, S = query.size(2), key.size(2)
    mask = torch.zeros(L, S, dtype=torch.float64).masked_fill(
        ~_seen(L, S, *masks), -math.inf
    )
    bias = mask if bias is None else bias.double() + mask
    return attention_backward(
        grad_out, query, key, value, out, rows, bias, False, scale
    )


def flash_lower_backward(
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
    rng_state,
    unused,
    *,
    scale=None,
    window_size_left=None,
    window_size_right=None,
):
    """`_flash_attention_backward`: (B, L, H, E) tensors with logsumexp (B, H, L),
    or packed (total, H, E) with cum_seq_q / cum_seq_k offsets and logsumexp
    (H, total); masks aligned to the bottom-right corner (dropout_p 0 only)."""
    check_real_floating("_flash_attention_backward", query)
    if dropout_p:
        raise RuntimeError("the reference takes no dropout")
    masks = (is_causal, False, window_size_left, window_size_right)

    def heads_first(*ts):
        return [t.transpose(1, 2) for t in ts]

    if cum_seq_q is None:
        parts = _aligned_backward(
            *heads_first(grad_out, query, key, value, out),
            logsumexp,
            None,
            masks,
            scale,
        )
        return tuple(g.transpose(1, 2) for g in parts[:3])
    grads = [torch.zeros_like(t) for t in (query, key, value)]
    count = cum_seq_q.numel() - 1
    keys = _segments(cum_seq_k, count)
    for b, (q0, q1) in enumerate(_segments(cum_seq_q, count)):
        k0, k1 = keys[b]
        if k1 == k0:
            continue
        seqs = [
            t.unsqueeze(0)
            for t in (
                grad_out[q0:q1],
                query[q0:q1],
                key[k0:k1],
                value[k0:k1],
                out[q0:q1],
            )
        ]
        parts = _aligned_backward(
            *heads_first(*seqs), logsumexp[:, q0:q1].unsqueeze(0), None, masks, scale
        )
        for g, part, (lo, hi) in zip(grads, parts, ((q0, q1), (k0, k1), (k0, k1))):
            g[lo:hi] = part.transpose(1, 2).squeeze(0)
    return tuple(grads)


def efficient_lower_backward(
    grad_out_,
    query,
    key,
    value,
    bias,
    out,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    logsumexp,
    dropout_p,
    philox_seed,
    philox_offset,
    custom_mask_type,
    bias_requires_grad,
    *,
    scale=None,
    num_splits_key=None,
    window_size=None,
    shared_storage_dqdkdv=False,
):
    """`_efficient_attention_backward`: (B, M, H, K) tensors, an additive bias
    (B, H, M, N), logsumexp (B, H, M padded); or packed (B = 1, cu_seqlens_q /
    cu_seqlens_k offsets, a row of logsumexp per sequence). custom_mask_type 0,
    1 (causal from the top-left corner) or 2 (from the bottom-right); the bias's
    gradient (dS summed to its shape) when bias_requires_grad (dropout_p 0 and no
    window only)."""
    check_real_floating("_efficient_attention_backward", query)
    if dropout_p or window_size is not None:
        raise RuntimeError("the reference takes no dropout and no window")
    masks = (custom_mask_type != 0, custom_mask_type == 1, None, None)
    grads = [torch.zeros_like(t) for t in (query, key, value)]
    if cu_seqlens_q is None:
        M = query.size(1)
        parts = _aligned_backward(
            *(t.transpose(1, 2) for t in (grad_out_, query, key, value, out)),
            logsumexp[..., :M],
            bias,
            masks,
            scale,
        )
        g_bias = None
        if bias_requires_grad and bias is not None:
            g_bias = parts[3].sum_to_size(bias.shape).to(bias.dtype)
        return (*(g.transpose(1, 2) for g in parts[:3]), g_bias)
    count = cu_seqlens_q.numel() - 1
    keys = _segments(cu_seqlens_k, count)
    for b, (q0, q1) in enumerate(_segments(cu_seqlens_q, count)):
        k0, k1 = keys[b]
        if k1 == k0:
            continue
        seqs = (
            grad_out_[:, q0:q1],
            query[:, q0:q1],
            key[:, k0:k1],
            value[:, k0:k1],
            out[:, q0:q1],
        )
        parts = _aligned_backward(
            *(t.transpose(1, 2) for t in seqs),
            logsumexp[b : b + 1, :, : q1 - q0],
            None,
            masks,
            scale,
        )
        for g, part, (lo, hi) in zip(grads, parts, ((q0, q1), (k0, k1), (k0, k1))):
            g[:, lo:hi] = part.transpose(1, 2)
    return (*grads, None)


KERNELS = {
    "_flash_attention_forward": flash_forward,
    "_efficient_attention_forward": efficient_forward,
    "_flash_attention_backward": flash_lower_backward,
    "_efficient_attention_backward": efficient_lower_backward,
}
