"""The helpers of dualgen.formulas.transformer (the inference fast paths
_native_multi_head_attention and _transformer_encoder_layer_fwd) against torch's
autograd and forward AD of their definitions written out, float64."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close, jvp, vjp
from transformer_cases import (
    LAYER_MASKS,
    LAYER_SHAPES,
    MASKS,
    MHA_SHAPES,
    B,
    D,
    H,
    T,
    layer_args,
    mha_args,
)

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def mha_written_out(q, k, v, w, b, wo, bo, mask, mask_type, average):
    """_native_multi_head_attention's definition (a boolean mask, True = masked)."""
    dh = D // H
    (wq, wk, wv), (bq, bk, bv) = w.chunk(3), b.chunk(3)

    def heads(x):
        return x.reshape(B, T, H, dh).transpose(1, 2)

    s = heads((q @ wq.T + bq) / dh**0.5) @ heads(k @ wk.T + bk).transpose(-2, -1)
    if mask is not None:
        m = mask.to(torch.bool)
        s = s.masked_fill(m.reshape(B, 1, 1, T) if mask_type == 1 else m, float("-inf"))
    p = torch.softmax(s, -1)
    out = (p @ heads(v @ wv.T + bv)).transpose(1, 2).reshape(B, T, D) @ wo.T + bo
    return out, p.mean(1) if average else p


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("average", [True, False])
def test_native_multi_head_attention_helpers_match_autograd(mask, average):
    mask, mask_type = MASKS[mask]
    primals = [torch.randn(s, dtype=R) for s in MHA_SHAPES]

    def args(need_weights=True):
        return mha_args(*primals, mask, need_weights, average, mask_type)

    ours = torch.ops.aten._native_multi_head_attention(*args())
    written = mha_written_out(*primals, mask, mask_type, average)
    close(ours[0], written[0])
    close(ours[1], written[1])
    tangents = [torch.randn_like(t) for t in primals]
    expected = jvp(
        lambda *a: mha_written_out(*a, mask, mask_type, average), primals, tangents
    )
    for index in (0, 1):
        actual = F.native_multi_head_attention_tangent(index, *tangents, *args())
        close(actual, expected[index])
    assert F.native_multi_head_attention_tangent(1, *tangents, *args(False)) is None
    g_out, g_w = torch.randn_like(written[0]), torch.randn_like(written[1])

    def loss(*a):
        o, p = mha_written_out(*a, mask, mask_type, average)
        return (o * g_out).sum() + (p * g_w).sum()

    expected = vjp(loss, primals, torch.tensor(1.0, dtype=R))
    actual = F.native_multi_head_attention_grads(g_out, g_w, *args())
    for a, e in zip(actual, expected):
        close(a, e)


def encoder_layer_written_out(src, *params, use_gelu, norm_first, mask, mask_type):
    """_transformer_encoder_layer_fwd's definition."""
    w, b, wo, bo, nw1, nb1, nw2, nb2, fw1, fb1, fw2, fb2 = params
    fn = torch.nn.functional

    def attention(x):
        return mha_written_out(x, x, x, w, b, wo, bo, mask, mask_type, True)[0]

    def ffn(x):
        h = x @ fw1.T + fb1
        return (fn.gelu(h) if use_gelu else fn.relu(h)) @ fw2.T + fb2

    def ln1(x):
        return fn.layer_norm(x, [D], nw1, nb1, 1e-5)

    def ln2(x):
        return fn.layer_norm(x, [D], nw2, nb2, 1e-5)

    if norm_first:
        x1 = src + attention(ln1(src))
        return x1 + ffn(ln2(x1))
    x1 = ln1(src + attention(src))
    return ln2(x1 + ffn(x1))


@pytest.mark.parametrize("mask", LAYER_MASKS)
@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_helpers_match_autograd(mask, use_gelu, norm_first):
    mask, mask_type = MASKS[mask]
    primals = [torch.randn(s, dtype=R) for s in LAYER_SHAPES]
    args = layer_args(primals[0], primals[1:], use_gelu, norm_first, mask, mask_type)
    kw = {
        "use_gelu": use_gelu,
        "norm_first": norm_first,
        "mask": mask,
        "mask_type": mask_type,
    }
    ours = torch.ops.aten._transformer_encoder_layer_fwd(*args)
    close(ours, encoder_layer_written_out(*primals, **kw))
    tangents = [torch.randn_like(t) for t in primals]
    expected = jvp(lambda *a: encoder_layer_written_out(*a, **kw), primals, tangents)
    close(F.transformer_encoder_layer_tangent(*tangents, *args), expected)
    g = torch.randn_like(ours)
    expected = vjp(lambda *a: encoder_layer_written_out(*a, **kw), primals, g)
    for a, e in zip(F.transformer_encoder_layer_grads(g, *args), expected):
        close(a, e)
