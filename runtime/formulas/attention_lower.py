"""Helpers for the lower attention kernels that libraries call directly
(`_flash_attention_forward`, `_efficient_attention_forward`: what
torch.nn.attention.varlen and flash-attn style code reach on CUDA) and their
backward kernels (`_flash_attention_backward`, `_efficient_attention_backward`):
the VJPs, adjoints of the one-source tangent helpers (helpers/attention.yaml).

Their layouts are (B, L, H, E), or packed sequences (total, H, E) with cumulative
offsets, each sequence differentiated on its own. Their masks are the flash
kernels' (causal from the bottom-right corner, sliding windows, ALiBi; efficient
attention's custom_mask_type), made an additive bias where the top-left triangle
cannot say them (`_masks_as_bias`); the work itself is the CPU flash kernel's
helpers in `attention`.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import (
    aligned_attention_bias,
    attention_acc,
    attention_forward,
    attention_rows,
    attention_scale,
    finite_rows,
)
from dualgen.helper_basics import int_list, no_derivative, refuse_dropout

from .attention import device_attention_backward_grads_with_bias, flash_attention_grads

__all__ = [
    "efficient_backward_grads",
    "efficient_forward_grads",
    "flash_backward_grads",
    "flash_forward_grads",
]


def _masks_as_bias(query, key, bias, masks, alibi_slopes) -> tuple:
    """The flash kernels' masks for one batch in (B, H, L, E) layout, `masks`
    (is_causal, bottom_right, window_left, window_right), and ALiBi slopes, as
    `aligned_attention_bias` says them: (the additive bias with `bias` added, the
    top-left causal flag left to the kernel, whether a mask became a bias)."""
    is_causal, bottom_right, window_left, window_right = masks
    aligned = aligned_attention_bias(
        query.size(2),
        key.size(2),
        is_causal and bottom_right,
        window_left,
        window_right,
        alibi_slopes,
        attention_acc(query),
    )
    if aligned is None:
        return bias, is_causal, False
    total = aligned if bias is None else aligned + attention_acc(bias)
    return total, is_causal and not bottom_right, True


def _aligned_grads(
    grad_output,
    grad_rows,
    query,
    key,
    value,
    bias,
    output,
    rows,
    is_causal,
    bottom_right,
    window_left,
    window_right,
    alibi_slopes,
    scale,
):
    """Gradients (query, key, value, bias) of one batch of attention in (B, H, L, E)
    layout under the flash kernels' masks, as `aligned_attention_tangent` says
    them (its adjoint): the mask made a bias where needed, logsumexp recomputed
    with it."""
    total, causal, aligned = _masks_as_bias(
        query,
        key,
        bias,
        (is_causal, bottom_right, window_left, window_right),
        alibi_slopes,
    )
    if rows is None or aligned:
        sc = attention_scale(query, scale)
        rows = attention_forward(query, key, value, total, causal, sc)[1]
    gq, gk, gv, gm = flash_attention_grads(
        grad_output,
        grad_rows,
        query,
        key,
        value,
        total,
        output,
        finite_rows(rows),
        0.0,
        causal,
        scale,
    )
    if bias is not None and gm is not None:
        gm = gm.sum_to_size(bias.shape).to(bias.dtype)
    return gq, gk, gv, (gm if bias is not None else None)


def _heads_first(t):
    """(B, L, H, E) as (B, H, L, E); None stays None."""
    return None if t is None else t.transpose(1, 2)


def flash_forward_grads(
    grad_output,
    grad_logsumexp,
    query,
    key,
    value,
    output,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    dropout_p,
    is_causal,
    scale,
    window_size_left,
    window_size_right,
    seqused_k,
    alibi_slopes,
    block_table,
) -> tuple:
    """Gradients (query, key, value) of `_flash_attention_forward` from those of
    output and softmax_logsumexp (None where absent): the adjoint of
    `flash_forward_tangents`, sequence by sequence for packed sequences (keys a
    sequence does not use get zero gradients)."""
    refuse_dropout(dropout_p, "_flash_attention_forward")
    if block_table is not None:
        no_derivative("_flash_attention_forward", "block_table", "a paged cache")
    if cum_seq_q is None:
        gq, gk, gv, _ = _aligned_grads(
            _heads_first(grad_output),
            grad_logsumexp,
            *(_heads_first(t) for t in (query, key, value)),
            None,
            _heads_first(output),
            logsumexp,
            is_causal,
            True,
            window_size_left,
            window_size_right,
            alibi_slopes,
            scale,
        )
        return tuple(_heads_first(g) for g in (gq, gk, gv))
    q_offsets, k_offsets = int_list(cum_seq_q), int_list(cum_seq_k)
    used = None if seqused_k is None else int_list(seqused_k)
    gq, gk, gv = (torch.zeros_like(t) for t in (query, key, value))
    for b in range(len(q_offsets) - 1):
        q0, q1, k0 = q_offsets[b], q_offsets[b + 1], k_offsets[b]
        k1 = k_offsets[b + 1] if used is None else k0 + used[b]
        if k1 == k0:
            continue

        def segment(t, lo, hi):
            return None if t is None else t[lo:hi].unsqueeze(0).transpose(1, 2)

        slopes = alibi_slopes
        if alibi_slopes is not None and alibi_slopes.dim() == 2:
            slopes = alibi_slopes[b]
        grad_rows = None
        if grad_logsumexp is not None:
            grad_rows = grad_logsumexp[:, q0:q1].unsqueeze(0)
        parts = _aligned_grads(
            segment(grad_output, q0, q1),
            grad_rows,
            segment(query, q0, q1),
            segment(key, k0, k1),
            segment(value, k0, k1),
            None,
            segment(output, q0, q1),
            logsumexp[:, q0:q1].unsqueeze(0),
            is_causal,
            True,
            window_size_left,
            window_size_right,
            slopes,
            scale,
        )
        gq[q0:q1] = parts[0].transpose(1, 2).squeeze(0)
        gk[k0:k1] = parts[1].transpose(1, 2).squeeze(0)
        gv[k0:k1] = parts[2].transpose(1, 2).squeeze(0)
    return gq, gk, gv


def efficient_forward_grads(
    grad_output,
    grad_logsumexp,
    query,
    key,
    value,
    bias,
    output,
    logsumexp,
    cu_seqlens_q,
    cu_seqlens_k,
    dropout_p,
    custom_mask_type,
    scale,
    seqlen_k,
    window_size,
) -> tuple:
    """Gradients (query, key, value, bias) of `_efficient_attention_forward` from
    those of output and logsumexp (None where absent; logsumexp's in the kernel's
    padded layout): the adjoint of `efficient_forward_tangents`."""
    refuse_dropout(dropout_p, "_efficient_attention_forward")
    if seqlen_k is not None:
        no_derivative("_efficient_attention_forward", "seqlen_k", "key lengths")
    if window_size is not None:
        no_derivative("_efficient_attention_forward", "window_size", "a window")
    is_causal, bottom_right = custom_mask_type != 0, custom_mask_type == 2
    if cu_seqlens_q is None:
        queries = query.size(1)
        gq, gk, gv, gb = _aligned_grads(
            _heads_first(grad_output),
            attention_rows(grad_logsumexp, queries),
            *(_heads_first(t) for t in (query, key, value)),
            bias,
            _heads_first(output),
            attention_rows(logsumexp, queries),
            is_causal,
            bottom_right,
            None,
            None,
            None,
            scale,
        )
        return (*(_heads_first(g) for g in (gq, gk, gv)), gb)
    if bias is not None:
        no_derivative("_efficient_attention_forward", "bias", "packed sequences")
    q_offsets, k_offsets = int_list(cu_seqlens_q), int_list(cu_seqlens_k)
    gq, gk, gv = (torch.zeros_like(t) for t in (query, key, value))
    for b in range(len(q_offsets) - 1):
        q0, q1, k0, k1 = q_offsets[b], q_offsets[b + 1], k_offsets[b], k_offsets[b + 1]
        if k1 == k0:
            continue
        rows = attention_rows(logsumexp[b : b + 1], q1 - q0)
        grad_rows = attention_rows(
            None if grad_logsumexp is None else grad_logsumexp[b : b + 1], q1 - q0
        )
        parts = _aligned_grads(
            None if grad_output is None else grad_output[:, q0:q1].transpose(1, 2),
            grad_rows,
            query[:, q0:q1].transpose(1, 2),
            key[:, k0:k1].transpose(1, 2),
            value[:, k0:k1].transpose(1, 2),
            None,
            output[:, q0:q1].transpose(1, 2),
            rows,
            is_causal,
            bottom_right,
            None,
            None,
            None,
            scale,
        )
        gq[:, q0:q1] = parts[0].transpose(1, 2)
        gk[:, k0:k1] = parts[1].transpose(1, 2)
        gv[:, k0:k1] = parts[2].transpose(1, 2)
    return gq, gk, gv, None


def _aligned_backward_grads(
    along, grad_out, query, key, value, bias, out, logsumexp, masks, scale
) -> tuple:
    """Gradients (grad_out, query, key, value, bias, out, logsumexp) of one batch
    of attention's backward kernel in (B, H, L, E) layout from those of its
    outputs (`along`: grad_query, grad_key, grad_value, and the bias gradient's;
    None where absent), logsumexp as given in the kernel's layout; `masks`:
    (is_causal, bottom_right, window_left, window_right), the flash kernels'
    masks made a bias where the top-left triangle cannot say them (the adjoint of
    `aligned_attention_backward_tangent`). The bias's gradient is None without a
    bias."""
    total, causal, _ = _masks_as_bias(query, key, bias, masks, None)
    grads = device_attention_backward_grads_with_bias(
        *along, grad_out, query, key, value, total, out, logsumexp, 0.0, causal, scale
    )
    g_bias = grads[4]
    if bias is None or g_bias is None:
        g_bias = None
    else:
        g_bias = g_bias.sum_to_size(bias.shape).to(bias.dtype)
    return (*grads[:4], g_bias, *grads[5:])


def _packed(t, start, end):
    """One sequence of a packed (total, H, E) tensor as (1, H, L, E); None stays."""
    return None if t is None else t[start:end].unsqueeze(0).transpose(1, 2)


def _unpacked(t):
    """(1, H, L, E) back to (L, H, E)."""
    return t.transpose(1, 2).squeeze(0)


def flash_backward_grads(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    dropout_p,
    is_causal,
    scale,
    window_size_left,
    window_size_right,
) -> tuple:
    """Gradients (grad_out, query, key, value, out, logsumexp) of
    `_flash_attention_backward` from those of its outputs (None where absent): the
    adjoint of `flash_backward_tangent`, sequence by sequence for packed sequences
    (keys and rows outside every sequence get zero gradients)."""
    refuse_dropout(dropout_p, "_flash_attention_backward")
    along = (grad_grad_query, grad_grad_key, grad_grad_value, None)
    masks = (is_causal, True, window_size_left, window_size_right)
    if cum_seq_q is None:
        grads = _aligned_backward_grads(
            tuple(_heads_first(t) for t in along[:3]) + (None,),
            *(_heads_first(t) for t in (grad_out, query, key, value)),
            None,
            _heads_first(out),
            logsumexp,
            masks,
            scale,
        )
        g_out_, gq, gk, gv, _, g_o, g_lse = grads
        return (*(_heads_first(g) for g in (g_out_, gq, gk, gv, g_o)), g_lse)
    q_offsets, k_offsets = int_list(cum_seq_q), int_list(cum_seq_k)
    result = [
        torch.zeros_like(t) for t in (grad_out, query, key, value, out, logsumexp)
    ]
    for b in range(len(q_offsets) - 1):
        q0, q1, k0, k1 = q_offsets[b], q_offsets[b + 1], k_offsets[b], k_offsets[b + 1]
        if k1 == k0:
            continue
        queries, keys = (q0, q1), (k0, k1)
        grads = _aligned_backward_grads(
            (
                *(
                    _packed(t, *span)
                    for t, span in zip(along[:3], (queries, keys, keys))
                ),
                None,
            ),
            _packed(grad_out, *queries),
            _packed(query, *queries),
            _packed(key, *keys),
            _packed(value, *keys),
            None,
            _packed(out, *queries),
            logsumexp[:, q0:q1].unsqueeze(0),
            masks,
            scale,
        )
        for i, span in ((0, queries), (1, queries), (2, keys), (3, keys), (4, queries)):
            g = grads[i if i < 4 else 5]
            if g is not None:
                result[i][span[0] : span[1]] = _unpacked(g)
        if grads[6] is not None:
            result[5][:, q0:q1] = grads[6].squeeze(0)
    return tuple(result)


def efficient_backward_grads(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_grad_bias,
    grad_out,
    query,
    key,
    value,
    bias,
    out,
    logsumexp,
    cu_seqlens_q,
    cu_seqlens_k,
    dropout_p,
    custom_mask_type,
    scale,
    window_size,
) -> tuple:
    """Gradients (grad_out, query, key, value, bias, out, logsumexp) of
    `_efficient_attention_backward` from those of its outputs (None where absent):
    the adjoint of `efficient_backward_tangent` and
    `efficient_backward_bias_tangent`, sequence by sequence for packed sequences
    (logsumexp's gradient in the kernel's padded layout)."""
    refuse_dropout(dropout_p, "_efficient_attention_backward")
    if window_size is not None:
        no_derivative("_efficient_attention_backward", "window_size", "a window")
    masks = (custom_mask_type != 0, custom_mask_type == 2, None, None)
    along = (grad_grad_query, grad_grad_key, grad_grad_value)
    if cu_seqlens_q is None:
        grads = _aligned_backward_grads(
            (*(_heads_first(t) for t in along), grad_grad_bias),
            *(_heads_first(t) for t in (grad_out, query, key, value)),
            bias,
            _heads_first(out),
            logsumexp,
            masks,
            scale,
        )
        g_out_, gq, gk, gv, g_bias, g_o, g_lse = grads
        heads_first = (_heads_first(g) for g in (g_out_, gq, gk, gv))
        return (*heads_first, g_bias, _heads_first(g_o), g_lse)
    if bias is not None:
        no_derivative("_efficient_attention_backward", "bias", "packed sequences")
    q_offsets, k_offsets = int_list(cu_seqlens_q), int_list(cu_seqlens_k)
    result = [
        torch.zeros_like(t) for t in (grad_out, query, key, value, out, logsumexp)
    ]
    for b in range(len(q_offsets) - 1):
        q0, q1, k0, k1 = q_offsets[b], q_offsets[b + 1], k_offsets[b], k_offsets[b + 1]
        if k1 == k0:
            continue

        def seq(t, lo, hi):
            return None if t is None else t[:, lo:hi].transpose(1, 2)

        queries, keys = (q0, q1), (k0, k1)
        grads = _aligned_backward_grads(
            (*(seq(t, *span) for t, span in zip(along, (queries, keys, keys))), None),
            seq(grad_out, *queries),
            seq(query, *queries),
            seq(key, *keys),
            seq(value, *keys),
            None,
            seq(out, *queries),
            logsumexp[b : b + 1],
            masks,
            scale,
        )
        for i, span in ((0, queries), (1, queries), (2, keys), (3, keys), (4, queries)):
            g = grads[i if i < 4 else 5]
            if g is not None:
                result[i][:, span[0] : span[1]] = g.transpose(1, 2)
        if grads[6] is not None:
            result[5][b : b + 1] = grads[6]
    return (*result[:4], None, *result[4:])
