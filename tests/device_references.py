"""Reference CPU kernels for device-only aten ops, for the tests only (never in the
package): each computes, from math ops, what its device kernel computes, outputs
and their layouts included, so dualgen's generated rules for those ops run and are
proved on a machine without the device.

`register()` adds them as the ops' CPU kernels (torch has none); the test session
calls it (tests/conftest.py), and `dualgen validate --import tests.device_references`
does on import.

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

logsumexp is float64 for float64 inputs (the device kernels take no float64;
here gradcheck does). Padding rows hold zeros (constants: finite differences see
none of them move).
A row masked everywhere gives out 0 and logsumexp 0, as the CPU flash kernel does.

The others: `cudnn_batch_norm` and `miopen_batch_norm` (native_batch_norm's
outputs, the running statistics updated once; cuDNN adds an empty reserve) and
`max_pool2d_backward` (max_pool2d_with_indices_backward at the maxima of self).
Dropout draws its mask from the global generator (the device kernels draw theirs
inside, from a state of their own); dualgen's rules refuse dropout_p > 0.
"""

from __future__ import annotations

import math

import torch

_LIBRARY = None
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


def _lse_dtype(query):
    return torch.float64 if query.dtype == torch.float64 else torch.float32


def _empty(dtype=torch.int64):
    return torch.empty(0, dtype=dtype)


def _with_sequence_outputs(out, lse, query, key):
    """flash's and cuDNN's nine outputs: out and logsumexp, then the (empty)
    cumulative sequence lengths, the lengths, the (empty) generator state and
    debug mask."""
    empty_int = _empty(torch.int32)
    lengths = (query.size(2), key.size(2))
    return (
        out,
        lse,
        empty_int,
        empty_int.clone(),
        *lengths,
        _empty(),
        _empty(),
        _empty(query.dtype),
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
    return _with_sequence_outputs(out, lse.to(_lse_dtype(query)), query, key)


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
    padded = torch.zeros((B, H, rows), dtype=_lse_dtype(query))
    padded[:, :, : min(rows, L)] = lse[:, :, : min(rows, L)]
    return out, padded, _empty(), _empty()


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
        stats = lse.unsqueeze(-1).to(_lse_dtype(query))
    else:
        stats = torch.empty(0, dtype=_lse_dtype(query))
    return _with_sequence_outputs(out, stats, query, key)


def cudnn_batch_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    exponential_average_factor,
    epsilon,
):
    """(output, save_mean, save_invstd, reserve): native_batch_norm's, the running
    statistics updated in place once, an empty reserve. Arguments are checked
    first, as cuDNN checks them (native_batch_norm's CPU kernel can crash on
    statistics of the wrong length)."""
    channels = input.size(1) if input.dim() >= 2 else -1
    for name, t in (
        ("weight", weight),
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
    ):
        if t is not None and (channels < 0 or t.dim() != 1 or t.numel() != channels):
            raise RuntimeError(
                f"cudnn_batch_norm: {name} must have one element per channel of input"
            )
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("cudnn_batch_norm: evaluation takes running statistics")
    out, mean, invstd = torch.ops.aten.native_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        exponential_average_factor,
        epsilon,
    )
    return out, mean, invstd, torch.empty(0, dtype=torch.uint8)


def miopen_batch_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    exponential_average_factor,
    epsilon,
):
    return cudnn_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        exponential_average_factor,
        epsilon,
    )[:3]


def max_pool2d_backward(
    grad_output, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    """The gradient of max_pool2d: grad_output scattered to where each window's
    maximum is (max_pool2d_with_indices' indices)."""
    _, indices = torch.ops.aten.max_pool2d_with_indices(
        self, kernel_size, stride, padding, dilation, ceil_mode
    )
    return torch.ops.aten.max_pool2d_with_indices_backward(
        grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
    )


KERNELS = {
    "_scaled_dot_product_flash_attention": flash,
    "_scaled_dot_product_efficient_attention": efficient,
    "_scaled_dot_product_cudnn_attention": cudnn,
    "cudnn_batch_norm": cudnn_batch_norm,
    "miopen_batch_norm": miopen_batch_norm,
    "max_pool2d_backward": max_pool2d_backward,
}


def register() -> None:
    """Add the references as the ops' CPU kernels (once; only where torch has
    none, so a build with its own kernels keeps them)."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = torch.library.Library("aten", "IMPL")
    for name, kernel in KERNELS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CPU"):
            _LIBRARY.impl(name, kernel, "CPU")


register()
