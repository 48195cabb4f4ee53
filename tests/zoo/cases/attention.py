"""Zoo cases: attention (multi-head attention, transformers, SDPA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import case

# ---------------------------------------------------------------- attention


@case("attention")
def mha(c):
    m = c.mod(nn.MultiheadAttention(8, 2))
    q, k, v = c.randn(4, 2, 8), c.randn(5, 2, 8), c.randn(5, 2, 8)
    return m, (q, k, v)


@case("attention")
def mha_self_batch_first_mask(c):
    m = c.mod(nn.MultiheadAttention(8, 2, batch_first=True))
    x = c.randn(2, 4, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=c.dtype)
    return (lambda x: m(x, x, x, attn_mask=mask)), (x,)


@case("attention")
def mha_eval_fastpath(c):
    m = c.mod(nn.MultiheadAttention(8, 2, batch_first=True), train=False)
    x = c.randn(2, 4, 8)
    return (lambda x: m(x, x, x)), (x,)


@case("attention")
def mha_params(c):
    m = c.mod(nn.MultiheadAttention(8, 2))
    return c.with_params(m, c.randn(4, 2, 8), call=lambda fm, x: fm(x, x, x))


@case("attention")
def transformer_encoder_layer(c):
    m = c.mod(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16))
    return m, (c.randn(4, 2, 8),)


@case("attention")
def transformer_encoder_layer_eval(c):
    m = c.mod(
        nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True),
        train=False,
    )
    return m, (c.randn(2, 4, 8),)


@case("attention")
def transformer_encoder_eval_padding(c):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    m = c.mod(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), train=False)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    return (lambda x: m(x, src_key_padding_mask=pad)), (c.randn(2, 4, 8),)


@case("attention")
def transformer_decoder_layer(c):
    m = c.mod(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, norm_first=True))
    return m, (c.randn(4, 2, 8), c.randn(5, 2, 8))


@case("attention")
def transformer(c):
    m = c.mod(nn.Transformer(8, 2, 1, 1, dim_feedforward=16))
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=c.dtype)
    return (lambda s, t: m(s, t, tgt_mask=tgt_mask)), (
        c.randn(4, 2, 8),
        c.randn(3, 2, 8),
    )


@case("attention")
def sdpa(c):
    return F.scaled_dot_product_attention, (
        c.randn(2, 2, 4, 8),
        c.randn(2, 2, 5, 8),
        c.randn(2, 2, 5, 8),
    )


@case("attention")
def sdpa_causal(c):
    q, k, v = c.randn(2, 2, 4, 8), c.randn(2, 2, 4, 8), c.randn(2, 2, 4, 8)
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)), (
        q,
        k,
        v,
    )


@case("attention")
def sdpa_bool_mask(c):
    mask = torch.rand(4, 5) > 0.3
    mask[:, 0] = True
    q, k, v = c.randn(2, 4, 8), c.randn(2, 5, 8), c.randn(2, 5, 8)
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)), (
        q,
        k,
        v,
    )


@case("attention")
def sdpa_float_mask(c):
    q, k, v, m = (
        c.randn(2, 2, 4, 8),
        c.randn(2, 2, 5, 8),
        c.randn(2, 2, 5, 8),
        c.randn(4, 5),
    )
    return (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)), (
        q,
        k,
        v,
        m,
    )


@case("attention")
def sdpa_gqa_scale(c):
    q, k, v = c.randn(1, 4, 3, 8), c.randn(1, 2, 5, 8), c.randn(1, 2, 5, 8)
    f = lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, scale=0.3, enable_gqa=True
    )
    return f, (q, k, v)
