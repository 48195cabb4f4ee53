"""torch.nn.attention.flex_attention in eager: a higher-order operator, which the
dual mode runs as its dense implementation (the user's score_mod and mask_mod
included) so the aten rules differentiate it; its autograd Function (inputs that
require grad) runs as plain code. Native forward AD raises on both. Against native
forward AD through attention written out, central differences, torch's own
gradients, and forward over reverse against central differences of the gradient;
both kernel backends."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import dualgen.forward_ad as fwAD

pytestmark = pytest.mark.usefixtures("on_the_cpu")

B, H, HK, L, S, E = 2, 4, 2, 6, 7, 4


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


BIAS = _rand(H, L, S, seed=9)


def _causal(b, h, q, k):
    return q >= k


def _relative(score, b, h, q, k):
    return score + 0.3 * (q - k) + torch.tanh(score) * 0.2


def _biased(score, b, h, q, k):
    return score + BIAS[h, q, k]


# (score_mod, mask_mod, grouped-query heads)
CASES = {
    "score_mod": (_relative, None, False),
    "causal_block_mask": (None, _causal, False),
    "bias_tensor_and_mask_gqa": (_biased, _causal, True),
}


def _call(case, q, k, v):
    score_mod, mask_mod, gqa = CASES[case]
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, 1, 1, L, S, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex_attention's own warning
        return flex_attention(
            q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa
        )


def _written(case, q, k, v):
    """The same attention in plain ops (native forward AD differentiates it)."""
    score_mod, mask_mod, gqa = CASES[case]
    if gqa:
        k, v = (t.repeat_interleave(H // HK, 1) for t in (k, v))
    s = q @ k.transpose(-2, -1) / E**0.5
    b, h, i, j = torch.meshgrid(
        torch.arange(B),
        torch.arange(H),
        torch.arange(L),
        torch.arange(S),
        indexing="ij",
    )
    if score_mod is not None:
        s = score_mod(s, b, h, i, j)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, i, j), -torch.inf)
    return torch.softmax(s, -1) @ v


def _inputs(case):
    heads_k = HK if CASES[case][2] else H
    shapes = [(B, H, L, E), (B, heads_k, S, E), (B, heads_k, S, E)]
    return (
        [_rand(*s, seed=i) for i, s in enumerate(shapes)],
        [_rand(*s, seed=10 + i) for i, s in enumerate(shapes)],
    )


@pytest.mark.parametrize("case", list(CASES))
def test_flex_attention_tangent(backend, case):
    primals, tangents = _inputs(case)
    with fwAD.dual_level():
        out = _call(case, *(fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
        got = fwAD.unpack_dual(out).tangent
    with native_fwAD.dual_level():
        duals = [native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        expected = native_fwAD.unpack_dual(_written(case, *duals)).tangent
    torch.testing.assert_close(got, expected)
    eps = 1e-6
    plus, minus = (
        _call(case, *(p + s * t for p, t in zip(primals, tangents)))
        for s in (eps, -eps)
    )
    torch.testing.assert_close(got, (plus - minus) / (2 * eps))


def test_a_bias_tensor_with_a_tangent_in_score_mod(backend):
    # score_mod reads a tensor of its closure: its tangent enters the output's.
    global BIAS
    primals, _ = _inputs("bias_tensor_and_mask_gqa")
    bias_t = _rand(*BIAS.shape, seed=30)
    saved = BIAS
    try:
        with fwAD.dual_level():
            BIAS = fwAD.make_dual(saved, bias_t)
            got = fwAD.unpack_dual(_call("bias_tensor_and_mask_gqa", *primals)).tangent
        eps = 1e-6
        outs = []
        for s in (eps, -eps):
            BIAS = saved + s * bias_t
            outs.append(_call("bias_tensor_and_mask_gqa", *primals))
    finally:
        BIAS = saved
    torch.testing.assert_close(got, (outs[0] - outs[1]) / (2 * eps))


def _operator(case, q, k, v):
    """The operator flex_attention calls (torch refuses inputs that require grad
    on the CPU before calling it; on CUDA it takes them): its autograd path."""
    from torch._higher_order_ops.flex_attention import flex_attention as operator
    from torch.nn.attention import flex_attention as api

    score_mod, mask_mod, _ = CASES[case]
    if mask_mod is None:
        block_mask = api._create_empty_block_mask(q, k)
    else:
        block_mask = create_block_mask(mask_mod, 1, 1, L, S, device="cpu")
    options = api._apply_kernel_options(q, k, v, True, None)
    return operator(
        q, k, v, score_mod or api._identity, block_mask.as_tuple(), E**-0.5, options
    )[0]


@pytest.mark.parametrize("case", list(CASES))
def test_flex_attention_recorded_and_forward_over_reverse(backend, case):
    # Inputs that require grad take flex attention's autograd Function, run as
    # plain code under a level: the tangent, torch's own gradient (through its
    # backward operator, outside a level), the gradient's tangent.
    primals, tangents = _inputs(case)
    cotangent = _rand(B, H, L, E, seed=40)

    def gradient(values, dual=False):
        leaves = [p.clone().requires_grad_() for p in values]
        inputs = leaves
        if dual:
            inputs = [fwAD.make_dual(p, t) for p, t in zip(leaves, tangents)]
        out = _operator(case, *inputs)
        return out, torch.autograd.grad(out, leaves, cotangent)

    with fwAD.dual_level():
        out, grads = gradient(primals, dual=True)
        out_t = fwAD.unpack_dual(out).tangent
        grads_t = [fwAD.unpack_dual(g).tangent for g in grads]
        grads = [fwAD.unpack_dual(g).primal for g in grads]
    _, expected = gradient(primals)  # torch's own backward of flex_attention
    torch.testing.assert_close(grads, list(expected))
    eps = 1e-6
    (out_plus, plus), (out_minus, minus) = (
        gradient([p + s * t for p, t in zip(primals, tangents)]) for s in (eps, -eps)
    )
    torch.testing.assert_close(out_t, (out_plus - out_minus) / (2 * eps))
    for got, a, b in zip(grads_t, plus, minus):
        torch.testing.assert_close(got, (a - b) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_another_higher_order_operator_is_refused_clearly(backend):
    x = _rand(3, seed=1)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError, match="higher-order operator cond"):
            torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (dual,))
