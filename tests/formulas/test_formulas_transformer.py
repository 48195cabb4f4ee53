"""The helpers of dualgen.formulas.transformer (the inference fast paths
_native_multi_head_attention and _transformer_encoder_layer_fwd) against torch's
autograd and forward AD of their definitions written out, float64."""

from __future__ import annotations

import pytest
import torch
from formula_checks import R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


NB, NT, ND, NH, NF = 2, 4, 6, 2, 10
PADDING = torch.tensor([[False] * NT, [False, False, True, True]])
FAST_MASKS = [
    (None, None),
    (PADDING, 1),
    (torch.ones(NT, NT, dtype=torch.bool).triu(1), 0),
    (
        torch.zeros(NB, NH, NT, NT, dtype=R).index_fill(
            3, torch.tensor([1]), float("-inf")
        ),
        2,
    ),
]


def mha_written_out(q, k, v, w, b, wo, bo, mask, mask_type, average):
    """_native_multi_head_attention's definition (a boolean mask, True = masked)."""
    dh = ND // NH
    (wq, wk, wv), (bq, bk, bv) = w.chunk(3), b.chunk(3)

    def heads(x):
        return x.reshape(NB, NT, NH, dh).transpose(1, 2)

    s = heads((q @ wq.T + bq) / dh**0.5) @ heads(k @ wk.T + bk).transpose(-2, -1)
    if mask is not None:
        m = mask.to(torch.bool)
        s = s.masked_fill(
            m.reshape(NB, 1, 1, NT) if mask_type == 1 else m, float("-inf")
        )
    p = torch.softmax(s, -1)
    out = (p @ heads(v @ wv.T + bv)).transpose(1, 2).reshape(NB, NT, ND) @ wo.T + bo
    return out, p.mean(1) if average else p


def _mha_primals():
    shapes = [(NB, NT, ND)] * 3 + [(3 * ND, ND), (3 * ND,), (ND, ND), (ND,)]
    return [torch.randn(s, dtype=R) for s in shapes]


@pytest.mark.parametrize("mask, mask_type", FAST_MASKS)
@pytest.mark.parametrize("average", [True, False])
def test_native_multi_head_attention_helpers_match_autograd(mask, mask_type, average):
    primals = _mha_primals()
    q, k, v, w, b, wo, bo = primals
    ours = torch.ops.aten._native_multi_head_attention(
        q, k, v, ND, NH, w, b, wo, bo, mask, True, average, mask_type
    )
    written = mha_written_out(*primals, mask, mask_type, average)
    close(ours[0], written[0])
    close(ours[1], written[1])
    tangents = [torch.randn_like(t) for t in primals]
    expected = jvp(
        lambda *a: mha_written_out(*a, mask, mask_type, average), primals, tangents
    )
    for index in (0, 1):
        actual = F.native_multi_head_attention_tangent(
            index,
            *tangents,
            q,
            k,
            v,
            ND,
            NH,
            w,
            b,
            wo,
            bo,
            mask,
            True,
            average,
            mask_type,
        )
        close(actual, expected[index])
    assert (
        F.native_multi_head_attention_tangent(
            1, *tangents, q, k, v, ND, NH, w, b, wo, bo, mask, False, average, mask_type
        )
        is None
    )
    g_out, g_w = torch.randn_like(written[0]), torch.randn_like(written[1])

    def loss(*a):
        o, p = mha_written_out(*a, mask, mask_type, average)
        return (o * g_out).sum() + (p * g_w).sum()

    expected = vjp(loss, primals, torch.tensor(1.0, dtype=R))
    actual = F.native_multi_head_attention_grads(
        g_out, g_w, q, k, v, ND, NH, w, b, wo, bo, mask, True, average, mask_type
    )
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
        return fn.layer_norm(x, [ND], nw1, nb1, 1e-5)

    def ln2(x):
        return fn.layer_norm(x, [ND], nw2, nb2, 1e-5)

    if norm_first:
        x1 = src + attention(ln1(src))
        return x1 + ffn(ln2(x1))
    x1 = ln1(src + attention(src))
    return ln2(x1 + ffn(x1))


@pytest.mark.parametrize("mask, mask_type", FAST_MASKS[:3])
@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_helpers_match_autograd(
    mask, mask_type, use_gelu, norm_first
):
    shapes = [
        (NB, NT, ND),
        (3 * ND, ND),
        (3 * ND,),
        (ND, ND),
        (ND,),
        (ND,),
        (ND,),
        (ND,),
    ]
    shapes += [(ND,), (NF, ND), (NF,), (ND, NF), (ND,)]
    primals = [torch.randn(s, dtype=R) for s in shapes]
    src, params = primals[0], primals[1:]
    kw = {
        "use_gelu": use_gelu,
        "norm_first": norm_first,
        "mask": mask,
        "mask_type": mask_type,
    }
    ours = torch.ops.aten._transformer_encoder_layer_fwd(
        src,
        ND,
        NH,
        *params[:4],
        use_gelu,
        norm_first,
        1e-5,
        *params[4:],
        mask,
        mask_type,
    )
    close(ours, encoder_layer_written_out(*primals, **kw))
    tangents = [torch.randn_like(t) for t in primals]
    expected = jvp(lambda *a: encoder_layer_written_out(*a, **kw), primals, tangents)
    actual = F.transformer_encoder_layer_tangent(
        *tangents,
        src,
        ND,
        NH,
        *params[:4],
        use_gelu,
        norm_first,
        1e-5,
        *params[4:],
        mask,
        mask_type,
    )
    close(actual, expected)
    g = torch.randn_like(ours)
    expected = vjp(lambda *a: encoder_layer_written_out(*a, **kw), primals, g)
    actual = F.transformer_encoder_layer_grads(
        g,
        src,
        ND,
        NH,
        *params[:4],
        use_gelu,
        norm_first,
        1e-5,
        *params[4:],
        mask,
        mask_type,
    )
    for a, e in zip(actual, expected):
        close(a, e)
