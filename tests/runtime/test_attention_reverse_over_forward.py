"""Reverse over forward through F.scaled_dot_product_attention (the CPU flash
kernel): the gradient of a quantity of the tangent, as forward-mode training
(consistency models, MeanFlow) backpropagates a loss of the JVP to the weights.

The blockwise JVP reads the kernel's logsumexp, which autograd gives no
gradient: read as it is, the tangent's graph held the softmax statistics
constant and its gradient came out wrong without an error (up to 100% off).
Where autograd records the primals the tangent now computes logsumexp again,
differentiably. Oracles that share no code with the tiles: torch.func's grad of
its jvp of attention written out, and central differences of the quantity.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from devices import DEVICE
from test_attention_long_sequences import written_out

import dualgen.forward_ad as fwAD

R = torch.float64


def _inputs(shapes, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return [torch.randn(s, dtype=R, generator=g) for s in shapes]


def _quantity(attention, primals, tangents, weight):
    """<attention's tangent, weight> + <its output, weight>, dualgen's JVP."""
    with fwAD.dual_level():
        duals = [
            p if t is None else fwAD.make_dual(p, t) for p, t in zip(primals, tangents)
        ]
        out, out_t = fwAD.unpack_dual(attention(*duals))
        return (out_t * weight).sum() + (out * weight).sum()


def _sdpa(mask, is_causal):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            is_causal=is_causal,
            enable_gqa=k.size(1) != q.size(1),
        )

    return attention


def _oracle(mask, is_causal, primals, tangents, weight):
    """torch.func's gradient of the same quantity, attention written out."""

    def quantity(*ps):
        ts = [torch.zeros_like(p) if t is None else t for p, t in zip(ps, tangents)]
        out, out_t = torch.func.jvp(
            lambda *xs: written_out(*xs, mask, is_causal), tuple(ps), tuple(ts)
        )
        return (out_t * weight).sum() + (out * weight).sum()

    return torch.func.grad(quantity, argnums=(0, 1, 2))(*primals)


@pytest.mark.parametrize(
    "L, S, key_heads, masked, is_causal, tangents_on",
    [
        (5, 7, 2, False, False, "qkv"),
        (5, 7, 2, False, False, "v"),  # P v_t alone: P's gradient reaches q and k
        (6, 6, 1, False, True, "q"),  # grouped-query heads, causal
        (4, 9, 2, True, False, "k"),
        (300, 530, 2, True, False, "qkv"),  # several query and key tiles
    ],
)
def test_gradient_of_the_tangent_matches_torch_func(
    backend, L, S, key_heads, masked, is_causal, tangents_on
):
    B, H, E = 1, 2, 4
    shapes = [(B, H, L, E), (B, key_heads, S, E), (B, key_heads, S, E)]
    primals = _inputs(shapes)
    given = _inputs(shapes, seed=1)
    tangents = [t if n in tangents_on else None for n, t in zip("qkv", given)]
    mask = _inputs([(L, S)], seed=2)[0] if masked else None
    weight = _inputs([(B, H, L, E)], seed=3)[0]
    leaves = [p.clone().requires_grad_() for p in primals]
    quantity = _quantity(_sdpa(mask, is_causal), leaves, tangents, weight)
    grads = torch.autograd.grad(quantity, leaves)
    expected = _oracle(mask, is_causal, primals, tangents, weight)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9)


def test_gradient_of_the_tangent_matches_finite_differences(backend):
    """Along a random direction of (q, k, v), with an additive mask, against
    central differences of the quantity. (A mask that requires grad sends SDPA
    to its math path, not the flash kernel.)"""
    shapes = [(2, 2, 5, 4), (2, 2, 7, 4), (2, 2, 7, 4)]
    q, k, v = _inputs(shapes)
    tangents = _inputs(shapes, seed=1)
    directions = _inputs(shapes, seed=2)
    mask, weight = _inputs([(5, 7), (2, 2, 5, 4)], seed=3)
    attention = _sdpa(mask, is_causal=False)

    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    grads = torch.autograd.grad(_quantity(attention, leaves, tangents, weight), leaves)
    along = sum((g * d).sum() for g, d in zip(grads, directions))
    eps = 1e-6
    with torch.no_grad():
        shifted = [
            _quantity(
                attention,
                [x + h * d for x, d in zip((q, k, v), directions)],
                tangents,
                weight,
            )
            for h in (eps, -eps)
        ]
    torch.testing.assert_close(
        along, (shifted[0] - shifted[1]) / (2 * eps), rtol=1e-6, atol=1e-8
    )


def test_a_forward_mode_training_step_through_a_transformer_layer(backend):
    """What consistency models and MeanFlow train: a loss of the JVP of a
    transformer layer (its default path: SDPA's flash kernel), backpropagated to
    the weights. The same as with attention by its definition (the MATH backend,
    composite ops: no blockwise helper), and, along a random direction of every
    weight, as central differences of the loss. (torch.func is no oracle here:
    its reverse over forward through layer_norm holds mean and rstd constant.)"""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(4)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    layer = layer.to(R)
    x, tx = torch.randn(2, 9, 16, dtype=R), torch.randn(2, 9, 16, dtype=R)
    weight = torch.randn(2, 9, 16, dtype=R)
    params = list(layer.parameters())

    def loss(attention=contextlib.nullcontext):
        with fwAD.dual_level(), attention():
            out, out_t = fwAD.unpack_dual(layer(fwAD.make_dual(x, tx)))
            return (out_t * weight).sum() + (out * weight).sum()

    grads = torch.autograd.grad(loss(), params)
    math = torch.autograd.grad(loss(lambda: sdpa_kernel(SDPBackend.MATH)), params)
    for got, want in zip(grads, math):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)

    directions = [torch.randn_like(p) for p in params]
    eps = 1e-6

    def shifted(step):
        with torch.no_grad():
            for p, d in zip(params, directions):
                p.add_(d, alpha=step)
            try:
                return loss().item()
            finally:
                for p, d in zip(params, directions):
                    p.sub_(d, alpha=step)

    along = sum((g * d).sum() for g, d in zip(grads, directions)).item()
    expected = (shifted(eps) - shifted(-eps)) / (2 * eps)
    assert abs(along - expected) <= 1e-6 * abs(expected) + 1e-8, (along, expected)
