"""The helpers of dualgen.formulas.attention_lower and the one-source helpers of the
lower CUDA attention kernels (`_flash_attention_forward`,
`_efficient_attention_forward` and their backward kernels) against forward AD and
autograd of the tests' reference kernels (attention written out per sequence,
tests/device_references/attention_lower.py), dense and packed, float64."""

from __future__ import annotations

import device_references as references
import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from formula_checks import R, close, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- the lower CUDA kernels
# `_flash_attention_forward` / `_efficient_attention_forward`'s helpers against
# forward AD and autograd of the tests' reference kernels (attention written out per
# sequence, tests/device_references/), dense and packed, float64.

# (dense or packed lengths, H, Hk, is_causal, flash keywords)
LOWER_FLASH = [
    ((2, 3, 5), 2, 2, True, {}),  # dense, bottom-right
    ((1, 4, 4), 4, 2, True, {"window_size_left": 1}),
    ((2, 3, 6), 2, 2, False, {"alibi_slopes": torch.tensor([0.3, 0.6], dtype=R)}),
    (([3, 2], [4, 5]), 2, 1, True, {}),  # packed
    (([2, 3], [5, 4]), 2, 2, False, {"seqused_k": torch.tensor([3, 4])}),
]


def _lower_flash(case):
    lengths, h, hk, causal, kw = case
    if isinstance(lengths[0], list):
        ql, kl = lengths
        q = torch.randn(sum(ql), h, 4, dtype=R)
        k, v = (torch.randn(sum(kl), hk, 4, dtype=R) for _ in range(2))
        offsets = [
            torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()]) for n in (ql, kl)
        ]
        sizes = (max(ql), max(kl))
    else:
        b, lq, lk = lengths
        q = torch.randn(b, lq, h, 4, dtype=R)
        k, v = (torch.randn(b, lk, hk, 4, dtype=R) for _ in range(2))
        offsets, sizes = [None, None], (lq, lk)

    def call(q, k, v):
        return references.flash_forward(
            q, k, v, *offsets, *sizes, 0.0, causal, False, scale=0.5, **kw
        )[:2]

    keywords = [
        kw.get(n)
        for n in ("window_size_left", "window_size_right", "seqused_k", "alibi_slopes")
    ]
    return (q, k, v), call, (*offsets, 0.0, causal, 0.5, *keywords)


@pytest.mark.parametrize("case", LOWER_FLASH)
def test_flash_forward_tangents_and_grads(case):
    primals, call, rest = _lower_flash(case)
    tangents = [torch.randn_like(p) for p in primals]
    out, lse = call(*primals)
    with native_fwAD.dual_level():
        duals = call(*(native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
        expected = [native_fwAD.unpack_dual(d).tangent for d in duals]
    cum_q, cum_k, dropout_p, causal, scale, left, right, used, slopes = rest
    got = F.flash_forward_tangents(
        *tangents,
        *primals,
        out,
        lse,
        cum_q,
        cum_k,
        dropout_p,
        causal,
        scale,
        left,
        right,
        used,
        slopes,
        None,
    )
    close(list(got), expected)
    grads = [torch.randn_like(out), torch.randn_like(lse)]
    got = F.flash_forward_grads(
        *grads,
        *primals,
        out,
        lse,
        cum_q,
        cum_k,
        dropout_p,
        causal,
        scale,
        left,
        right,
        used,
        slopes,
        None,
    )
    close(list(got), list(vjp(call, primals, grads)))


# (query shape, key shape, bias, custom_mask_type, packed offsets or None)
LOWER_EFFICIENT = [
    ((2, 3, 2, 4), (2, 5, 2, 4), True, 2, None),
    ((1, 4, 2, 4), (1, 6, 2, 4), False, 1, None),
    ((1, 5, 2, 4), (1, 7, 2, 4), False, 2, ([0, 2, 5], [0, 4, 7])),
]


@pytest.mark.parametrize("compute_log_sumexp", [True, False], ids=["lse", "no-lse"])
@pytest.mark.parametrize("case", LOWER_EFFICIENT)
def test_efficient_forward_tangents_and_grads(case, compute_log_sumexp):
    q_shape, k_shape, with_bias, mask_type, packed = case
    primals = [torch.randn(*s, dtype=R) for s in (q_shape, k_shape, k_shape)]
    if with_bias:
        primals.append(
            torch.randn(q_shape[0], q_shape[2], q_shape[1], k_shape[1], dtype=R)
        )
    offsets = [None, None] if packed is None else [torch.tensor(o) for o in packed]
    sizes = [None, None] if packed is None else [3, 4]

    def call(q, k, v, bias=None):
        return references.efficient_forward(
            q,
            k,
            v,
            bias,
            *offsets,
            *sizes,
            0.0,
            mask_type,
            compute_log_sumexp,
            scale=0.5,
        )[:2]

    tangents = [torch.randn_like(p) for p in primals]
    out, lse = call(*primals)
    with native_fwAD.dual_level():
        duals = call(*(native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
        expected = [native_fwAD.unpack_dual(d).tangent for d in duals]
    bias, bias_t = (primals[3], tangents[3]) if with_bias else (None, None)
    got = F.efficient_forward_tangents(
        *tangents[:3],
        bias_t,
        *primals[:3],
        bias,
        out,
        lse,
        *offsets,
        0.0,
        mask_type,
        0.5,
        None,
        None,
    )
    close(got[0], expected[0])
    close(got[1], torch.zeros_like(lse) if expected[1] is None else expected[1])
    grads = [torch.randn_like(out), torch.randn_like(lse)]
    got = F.efficient_forward_grads(
        *grads, *primals[:3], bias, out, lse, *offsets, 0.0, mask_type, 0.5, None, None
    )
    if compute_log_sumexp:
        expected = vjp(call, primals, grads)
    else:  # logsumexp (B, H, 0): nothing flows back from it
        expected = vjp(lambda *a: call(*a)[0], primals, grads[0])
    close([g for g in got if g is not None], list(expected))


# The lower kernels' backward (`_flash_attention_backward`,
# `_efficient_attention_backward`): their helpers against forward AD and autograd of
# the tests' reference kernels (out and logsumexp read as given, the masks aligned as
# the forward kernels align them), dense and packed, float64.

# (query shape, key shape, is_causal, flash keywords, packed offsets or None)
LOWER_FLASH_BACKWARD = [
    ((2, 3, 2, 4), (2, 5, 2, 4), True, {}, None),  # bottom-right causal
    (
        (1, 4, 4, 4),
        (1, 4, 2, 4),
        False,
        {"window_size_left": 1, "window_size_right": 1},
        None,
    ),
    ((5, 2, 4), (9, 1, 4), True, {}, ([0, 3, 5], [0, 4, 9])),
]


def _native_jvp(fn, primals, tangents):
    with native_fwAD.dual_level():
        outs = fn(*(native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
        return [None if o is None else native_fwAD.unpack_dual(o).tangent for o in outs]


@pytest.mark.parametrize("case", LOWER_FLASH_BACKWARD)
def test_flash_backward_tangent_and_grads(case):
    q_shape, k_shape, causal, kw, packed = case
    g, q, out = (torch.randn(*q_shape, dtype=R) for _ in range(3))
    k, v = (torch.randn(*k_shape, dtype=R) for _ in range(2))
    if packed is None:
        lse = torch.randn(q_shape[0], q_shape[2], q_shape[1], dtype=R)
        offsets, sizes = [None, None], (q_shape[1], k_shape[1])
    else:
        lse = torch.randn(q_shape[1], q_shape[0], dtype=R)
        offsets, sizes = [torch.tensor(o) for o in packed], (3, 5)
    left, right = kw.get("window_size_left"), kw.get("window_size_right")
    primals = [g, q, k, v, out, lse]

    def backward(*args):
        return references.flash_lower_backward(
            *args, *offsets, *sizes, 0.0, causal, None, None, scale=0.5, **kw
        )

    tangents = [torch.randn_like(p) for p in primals]
    expected = _native_jvp(backward, primals, tangents)
    for index in range(3):
        got = F.flash_backward_tangent(
            index, *tangents, *primals, *offsets, 0.0, causal, 0.5, left, right
        )
        close(got, expected[index])
    cotangents = [torch.randn_like(t) for t in (q, k, v)]
    got = F.flash_backward_grads(
        *cotangents, *primals, *offsets, 0.0, causal, 0.5, left, right
    )
    close(list(got), list(vjp(backward, primals, cotangents)))


# (query shape, key shape, bias, custom_mask_type, packed offsets or None)
LOWER_EFFICIENT_BACKWARD = [
    ((2, 3, 2, 4), (2, 5, 2, 4), True, 2, None),
    ((1, 4, 2, 4), (1, 3, 2, 4), True, 1, None),
    ((1, 5, 2, 4), (1, 7, 2, 4), False, 0, None),
    ((1, 5, 2, 4), (1, 7, 2, 4), False, 2, ([0, 2, 5], [0, 4, 7])),
]


@pytest.mark.parametrize("case", LOWER_EFFICIENT_BACKWARD)
def test_efficient_backward_tangents_and_grads(case):
    q_shape, k_shape, with_bias, mask_type, packed = case
    g, q, out = (torch.randn(*q_shape, dtype=R) for _ in range(3))
    k, v = (torch.randn(*k_shape, dtype=R) for _ in range(2))
    count = q_shape[0] if packed is None else len(packed[0]) - 1
    lse = torch.randn(count, q_shape[2], 32, dtype=R)
    bias = None
    if with_bias:
        bias = torch.randn(q_shape[0], q_shape[2], q_shape[1], k_shape[1], dtype=R)
    offsets = [None, None] if packed is None else [torch.tensor(o) for o in packed]
    sizes = (q_shape[1], k_shape[1]) if packed is None else (3, 4)
    primals = [g, q, k, v] + ([bias] if with_bias else []) + [out, lse]

    def backward(g, q, k, v, *rest):
        b, (o, l) = (rest[0], rest[1:]) if with_bias else (None, rest)
        grads = references.efficient_lower_backward(
            g,
            q,
            k,
            v,
            b,
            o,
            *offsets,
            *sizes,
            l,
            0.0,
            None,
            None,
            mask_type,
            with_bias,
            scale=0.5,
        )
        return grads if with_bias else grads[:3]

    tangents = [torch.randn_like(p) for p in primals]
    expected = _native_jvp(backward, primals, tangents)
    t = dict(
        zip(["g", "q", "k", "v"] + (["b"] if with_bias else []) + ["o", "l"], tangents)
    )
    args = (
        t["g"],
        t["q"],
        t["k"],
        t["v"],
        t.get("b"),
        t["o"],
        t["l"],
        g,
        q,
        k,
        v,
        bias,
        out,
        lse,
    )
    for index in range(3):
        got = F.efficient_backward_tangent(
            index, *args, *offsets, 0.0, mask_type, 0.5, None
        )
        close(got, expected[index])
    result = torch.zeros_like(bias) if with_bias else None
    got = F.efficient_backward_bias_tangent(result, *args, mask_type, 0.5)
    if with_bias:
        close(got, expected[3])
    else:
        assert got is None
    cotangents = [torch.randn_like(x) for x in (q, k, v)] + (
        [torch.randn_like(bias)] if with_bias else []
    )
    got = F.efficient_backward_grads(
        *cotangents,
        *([None] if not with_bias else []),
        g,
        q,
        k,
        v,
        bias,
        out,
        lse,
        *offsets,
        0.0,
        mask_type,
        0.5,
        None,
    )
    expected = vjp(backward, primals, cotangents)
    close([x for x in got if x is not None], list(expected))
