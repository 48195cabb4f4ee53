"""Attention over sequences long enough that the blockwise JVP splits them into
several (query block, key block) tiles (256 keys; 128 query rows with 8
batch-heads), through the user-facing calls: F.scaled_dot_product_attention
(the CPU flash kernel), its backward under dual inputs (forward over reverse),
and the inference fast paths of nn.MultiheadAttention and
nn.TransformerEncoderLayer. float64 against central finite differences, and
SDPA against torch.func.jvp of attention written out (a dense oracle that
shares no code with the tiles)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_models_attention import (
    _seed,  # noqa: F401 (seeded, warnings off)
    check_hessian_vector_product,
    dual_run,
    finite_differences,
)
from torch import nn

R = torch.float64
L, S, E, H = 300, 530, 8, 8


def dual_tangent(fn, xs, ts):
    return dual_run(fn, xs, ts)[1]


central_difference = finite_differences


def written_out(q, k, v, mask, is_causal):
    kk = k.repeat_interleave(q.size(1) // k.size(1), 1)
    vv = v.repeat_interleave(q.size(1) // v.size(1), 1)
    s = q @ kk.transpose(-2, -1) / q.size(-1) ** 0.5
    if mask is not None:
        s = s + mask
    if is_causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ vv


@pytest.mark.parametrize(
    "key_heads, mask_shape, is_causal",
    [
        (8, None, False),
        (4, None, True),  # grouped-query heads, causal, L < S
        (8, (1, 1, 1, S), False),  # a key-padding-shaped additive mask
        (2, (L, S), True),
    ],
)
def test_sdpa_tangent_over_many_tiles(key_heads, mask_shape, is_causal):
    q = torch.randn(1, H, L, E, dtype=R)
    k, v = (torch.randn(1, key_heads, S, E, dtype=R) for _ in range(2))
    mask = None if mask_shape is None else torch.randn(mask_shape, dtype=R)
    gqa = key_heads != H

    def fn(q, k, v):
        if mask is not None and is_causal:
            # torch 2.14's F.scaled_dot_product_attention refuses a mask with
            # is_causal; the CPU flash kernel itself takes both (and GQA heads).
            flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
            return flash(q, k, v, 0.0, True, attn_mask=mask)[0]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=gqa
        )

    xs = [q, k, v]
    ts = [torch.randn_like(x) for x in xs]
    tangent = dual_tangent(fn, xs, ts)
    oracle = torch.func.jvp(
        lambda q, k, v: written_out(q, k, v, mask, is_causal), tuple(xs), tuple(ts)
    )[1]
    torch.testing.assert_close(tangent, oracle)
    torch.testing.assert_close(
        tangent, central_difference(fn, xs, ts), rtol=1e-5, atol=1e-7
    )


def test_sdpa_mask_tangent_over_many_tiles():
    q, k, v = (torch.randn(1, H, n, E, dtype=R) for n in (L, S, S))
    mask = torch.randn(1, H, L, S, dtype=R)

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    xs = [q, k, v, mask]
    ts = [torch.randn_like(x) for x in xs]
    torch.testing.assert_close(
        dual_tangent(fn, xs, ts), central_difference(fn, xs, ts), rtol=1e-5, atol=1e-7
    )


def test_hessian_vector_product_over_many_tiles():
    """Forward over reverse through the flash backward kernel, whose JVP sums
    grad_query over key tiles and grad_key, grad_value over query tiles."""
    q = torch.randn(1, H, L, E, dtype=R)
    k, v = (torch.randn(1, 4, S, E, dtype=R) for _ in range(2))

    def f(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return (out**2).sum()

    check_hessian_vector_product(f, [q, k, v])


def test_inference_fast_paths_over_many_tiles():
    """_native_multi_head_attention and _transformer_encoder_layer_fwd (eval,
    no_grad, batch_first) over 300 tokens and 8 heads, with padding masks."""
    width = 16
    mha = nn.MultiheadAttention(width, H, batch_first=True, dtype=R).eval()
    layer = nn.TransformerEncoderLayer(
        width, H, 32, dropout=0.0, batch_first=True, dtype=R
    ).eval()
    x = torch.randn(2, L, width, dtype=R)
    padding = torch.zeros(2, L, dtype=torch.bool)
    padding[1, -40:] = True
    calls = [
        lambda x: mha(x, x, x, key_padding_mask=padding, need_weights=False)[0],
        lambda x: layer(x, src_key_padding_mask=padding),
    ]
    t = torch.randn_like(x)
    with torch.no_grad():
        for fn in calls:
            torch.testing.assert_close(
                dual_tangent(fn, [x], [t]),
                central_difference(fn, [x], [t]),
                rtol=1e-5,
                atol=1e-7,
            )
