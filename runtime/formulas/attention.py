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

from dualgen.formulas.basics import int_list, no_derivative, refuse_dropout
from dualgen.generated.helpers import (
    aligned_attention_bias,
    attention_acc,
    attention_forward,
    attention_probabilities,
    attention_rows,
    attention_rows_like,
    attention_rows_logsumexp,
    attention_scale,
    expand_heads,
    finite_rows,
    sum_heads,
)

__all__ = [
    "device_attention_backward_grads",
    "device_attention_backward_grads_with_bias",
    "device_attention_grads",
    "efficient_backward_grads",
    "efficient_forward_grads",
    "flash_attention_backward_grads",
    "flash_attention_grads",
    "flash_backward_grads",
    "flash_forward_grads",
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
