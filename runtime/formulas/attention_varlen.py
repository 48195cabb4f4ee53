"""Helpers for torch's own variable-length attention ops, `torch_attn::_varlen_attn`
and `torch_attn::_varlen_attn_backward` (torch.nn.attention.varlen.varlen_attn):
custom ops, so a dispatch mode sees them and not the kernels they call
(`_flash_attention_forward`, or on some GPUs `_cudnn_attention_forward`). Their
rules live in a spec of their own (specs/torch_custom_ops.yaml), generated into
dualgen.generated.torch_custom_ops, loaded when the ops are first met.

Each is the flash kernel's helper (helpers/attention.yaml, attention_lower) on
the op's arguments as the flash kernel takes them: the window as two bounds (-1
for none), and logsumexp as (H, total) rows, which the cuDNN path returns as
(total, H, 1).
"""

from __future__ import annotations

from dualgen.generated.helpers import flash_backward_tangent, flash_forward_tangents

from .attention_lower import flash_backward_grads, flash_forward_grads

__all__ = [
    "varlen_backward_grads",
    "varlen_backward_tangent",
    "varlen_forward_grads",
    "varlen_forward_tangents",
    "varlen_rows",
    "varlen_rows_like",
    "varlen_window",
]


def varlen_window(window_size, side: int) -> int:
    """The window's bound on one side (0 left, 1 right) as the flash kernel takes
    it: -1, no bound, where there is no window (None)."""
    return -1 if window_size is None else int(window_size[side])


def varlen_rows(logsumexp):
    """logsumexp as the flash kernel's (H, total) rows: the cuDNN path's
    (total, H, 1) transposed; None stays None."""
    if logsumexp is None or logsumexp.dim() != 3:
        return logsumexp
    return logsumexp.squeeze(-1).transpose(0, 1)


def varlen_rows_like(rows, logsumexp):
    """(H, total) rows laid out as `logsumexp` is (the inverse of `varlen_rows`)."""
    if rows is None or logsumexp.dim() != 3:
        return rows
    return rows.transpose(0, 1).unsqueeze(-1)


def _flash_arguments(cu_seq_q, cu_seq_k, is_causal, scale, window_size) -> tuple:
    """The flash kernel's arguments for the sequences and masks: offsets,
    dropout (always off), causal, scale and the window's two bounds."""
    left, right = varlen_window(window_size, 0), varlen_window(window_size, 1)
    return cu_seq_q, cu_seq_k, 0.0, is_causal, scale, left, right


def varlen_forward_tangents(
    query_t,
    key_t,
    value_t,
    query,
    key,
    value,
    output,
    logsumexp,
    cu_seq_q,
    cu_seq_k,
    is_causal,
    scale,
    window_size,
    seqused_k,
    block_table,
) -> list:
    """The tangents [output_t, logsumexp_t] of `_varlen_attn`: packed sequences
    (total, H, E), the flash kernel's `flash_forward_tangents` per sequence
    (bottom-right causal masks, sliding windows, grouped-query heads), logsumexp's
    tangent in the layout the op returned (flash's or cuDNN's)."""
    output_t, rows_t = flash_forward_tangents(
        query_t,
        key_t,
        value_t,
        query,
        key,
        value,
        output,
        varlen_rows(logsumexp),
        *_flash_arguments(cu_seq_q, cu_seq_k, is_causal, scale, window_size),
        seqused_k,
        None,
        block_table,
    )
    return [output_t, varlen_rows_like(rows_t, logsumexp)]


def varlen_forward_grads(
    grad_output,
    grad_logsumexp,
    query,
    key,
    value,
    output,
    logsumexp,
    cu_seq_q,
    cu_seq_k,
    is_causal,
    scale,
    window_size,
    seqused_k,
    block_table,
) -> tuple:
    """Gradients (query, key, value) of `_varlen_attn`, the adjoint of
    `varlen_forward_tangents` (`flash_forward_grads`)."""
    return flash_forward_grads(
        grad_output,
        varlen_rows(grad_logsumexp),
        query,
        key,
        value,
        output,
        varlen_rows(logsumexp),
        *_flash_arguments(cu_seq_q, cu_seq_k, is_causal, scale, window_size),
        seqused_k,
        None,
        block_table,
    )


def varlen_backward_tangent(
    index,
    grad_out_t,
    query_t,
    key_t,
    value_t,
    out_t,
    logsumexp_t,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    cu_seq_q,
    cu_seq_k,
    is_causal,
    scale,
    window_size,
):
    """The tangent of grad_query (index 0), grad_key (1) or grad_value (2) of
    `_varlen_attn_backward` (forward over reverse through varlen_attn):
    `flash_backward_tangent` per sequence, logsumexp read in either layout."""
    return flash_backward_tangent(
        index,
        grad_out_t,
        query_t,
        key_t,
        value_t,
        out_t,
        varlen_rows(logsumexp_t),
        grad_out,
        query,
        key,
        value,
        out,
        varlen_rows(logsumexp),
        *_flash_arguments(cu_seq_q, cu_seq_k, is_causal, scale, window_size),
    )


def varlen_backward_grads(
    grad_grad_query,
    grad_grad_key,
    grad_grad_value,
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    cu_seq_q,
    cu_seq_k,
    is_causal,
    scale,
    window_size,
) -> tuple:
    """Gradients (grad_out, query, key, value, out, logsumexp) of
    `_varlen_attn_backward`, the adjoint of `varlen_backward_tangent`
    (`flash_backward_grads`), logsumexp's in the layout the op took."""
    grads = flash_backward_grads(
        grad_grad_query,
        grad_grad_key,
        grad_grad_value,
        grad_out,
        query,
        key,
        value,
        out,
        varlen_rows(logsumexp),
        *_flash_arguments(cu_seq_q, cu_seq_k, is_causal, scale, window_size),
    )
    return (*grads[:5], varlen_rows_like(grads[5], logsumexp))
