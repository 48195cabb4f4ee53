"""Attention modules at their DEFAULT settings on CPU under dualgen.forward_ad,
where native forward AD fails (PyTorch 2.13): F.scaled_dot_product_attention,
nn.MultiheadAttention and nn.Transformer* layers reach
aten::_scaled_dot_product_flash_attention_for_cpu (train and eval, with grad),
and in eval mode under torch.no_grad() (batch_first) the inference fast paths
aten::_native_multi_head_attention and aten::_transformer_encoder_layer_fwd.
Tangents are compared with central finite differences in float64, float32 with
float64, and with torch.func.jvp of attention written out (softmax(q k^T) v),
where native forward AD works."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dualgen.forward_ad as fwAD

R = torch.float64
B, L, S, E, H = 2, 5, 4, 8, 2


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # enable_nested_tensor notes
        yield


def dual_run(fn, xs, ts):
    """fn's value and tangent through dualgen.forward_ad."""
    with fwAD.dual_level():
        out = fn(*[fwAD.make_dual(x, t) for x, t in zip(xs, ts)])
        primal, tangent = fwAD.unpack_dual(out)
        assert tangent is not None
        return primal.clone(), tangent.clone()


def finite_differences(fn, xs, ts, eps=1e-6):
    plus = fn(*[x + eps * t for x, t in zip(xs, ts)])
    minus = fn(*[x - eps * t for x, t in zip(xs, ts)])
    return (plus - minus) / (2 * eps)


def check(fn, xs, fn64=None):
    """float64: the tangent equals finite differences; float32: the float64
    tangent (fn64 is fn on float64 copies of the module)."""
    ts = [torch.randn_like(x) for x in xs]
    value, tangent = dual_run(fn, xs, ts)
    torch.testing.assert_close(value, fn(*xs))
    if xs[0].dtype == R:
        expected = finite_differences(fn, xs, ts)
        torch.testing.assert_close(tangent, expected, rtol=1e-5, atol=1e-7)
    else:
        _, expected = dual_run(fn64, [x.double() for x in xs], [t.double() for t in ts])
        torch.testing.assert_close(tangent, expected.float(), rtol=2e-4, atol=2e-4)
    return tangent


def attention_written_out(q, k, v, mask=None, is_causal=False):
    s = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    if is_causal:
        s = s.masked_fill(
            ~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf")
        )
    if mask is not None:
        s = (
            s.masked_fill(~mask, float("-inf"))
            if mask.dtype == torch.bool
            else s + mask
        )
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("dtype", [R, torch.float32])
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float", "float_dual"])
def test_scaled_dot_product_attention(dtype, mask):
    q, k, v = (torch.randn(B, H, n, E, dtype=dtype) for n in (L, S, S))
    bool_mask = torch.rand(L, S) > 0.3
    bool_mask[:, 0] = True
    float_mask = torch.randn(B, 1, L, S, dtype=dtype)
    kwargs = {
        "none": {},
        "causal": {"is_causal": True},
        "bool": {"attn_mask": bool_mask},
        "float": {"attn_mask": float_mask},
    }
    if mask == "float_dual":  # a learned additive bias with its own tangent

        def fn(q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

        def ref(q, k, v, m):
            return attention_written_out(q, k, v, m)

        xs = [q, k, v, float_mask]
    else:

        def fn(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, **kwargs[mask])

        def ref(q, k, v):
            return attention_written_out(
                q,
                k,
                v,
                kwargs[mask].get("attn_mask"),
                kwargs[mask].get("is_causal", False),
            )

        xs = [q, k, v]
    tangent = check(fn, xs, fn)
    if dtype == R:
        ts = [torch.randn_like(x) for x in xs]
        _, ours = dual_run(fn, xs, ts)
        native = torch.func.jvp(ref, tuple(xs), tuple(ts))[1]
        torch.testing.assert_close(ours, native)
    assert torch.isfinite(tangent).all()


def test_scaled_dot_product_attention_grouped_query_heads():
    q = torch.randn(B, 4, L, E, dtype=R)
    k, v = torch.randn(B, 2, S, E, dtype=R), torch.randn(B, 2, S, E, dtype=R)
    check(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        [q, k, v],
    )


def _modules(dtype, batch_first, train):
    def layer(cls, **kw):
        return cls(E, H, 16, dropout=0.0, batch_first=batch_first, dtype=dtype, **kw)

    mods = {
        "mha": nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=dtype),
        "encoder": nn.TransformerEncoder(layer(nn.TransformerEncoderLayer), 2),
        "decoder_layer": layer(nn.TransformerDecoderLayer),
        "encoder_layer_gelu_norm_first": layer(
            nn.TransformerEncoderLayer, activation="gelu", norm_first=True
        ),
    }
    for m in mods.values():
        m.train(train)
    return mods


@pytest.mark.parametrize("dtype", [R, torch.float32])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_modules_with_masks(dtype, batch_first, train):
    mods = _modules(dtype, batch_first, train)
    mods64 = {k: copy.deepcopy(m).double() for k, m in mods.items()}
    shape = (B, L, E) if batch_first else (L, B, E)
    mshape = (B, S, E) if batch_first else (S, B, E)
    x, memory = torch.randn(shape, dtype=dtype), torch.randn(mshape, dtype=dtype)
    padding = torch.tensor([[False] * L, [False] * (L - 2) + [True] * 2])
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)

    def calls(m):
        return [
            (
                lambda x: m["mha"](
                    x, x, x, need_weights=False, key_padding_mask=padding
                )[0],
                [x],
            ),
            (lambda x: m["encoder"](x, mask=causal.to(x.dtype), is_causal=True), [x]),
            (lambda x: m["encoder"](x, src_key_padding_mask=padding), [x]),
            (
                lambda x: m["encoder_layer_gelu_norm_first"](
                    x, src_key_padding_mask=padding
                ),
                [x],
            ),
            (
                lambda x, mem: m["decoder_layer"](
                    x, mem, tgt_mask=causal.to(x.dtype), tgt_is_causal=True
                ),
                [x, memory],
            ),
        ]

    for (fn, xs), (fn64, _) in zip(calls(mods), calls(mods64)):
        check(fn, xs, fn64)


@pytest.mark.parametrize("dtype", [R, torch.float32])
def test_inference_fast_paths(dtype):
    """eval() under no_grad: _native_multi_head_attention (need_weights too) and
    _transformer_encoder_layer_fwd, with tangents on the input."""
    mods = _modules(dtype, True, False)
    mods64 = {k: copy.deepcopy(m).double() for k, m in mods.items()}
    x = torch.randn(B, L, E, dtype=dtype)
    padding = torch.tensor([[False] * L, [False] * (L - 2) + [True] * 2])
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)

    def calls(m):
        layer = m["encoder"].layers[0]
        return [
            lambda x: m["mha"](x, x, x, key_padding_mask=padding)[0],
            lambda x: m["mha"](x, x, x, average_attn_weights=False)[1],
            lambda x: layer(x, src_key_padding_mask=padding),
            lambda x: layer(x, src_mask=causal.to(x.dtype), is_causal=True),
            lambda x: m["encoder_layer_gelu_norm_first"](x),
        ]

    with torch.no_grad():
        for fn, fn64 in zip(calls(mods), calls(mods64)):
            check(fn, [x], fn64)


def test_encoder_layer_parameter_tangents():
    """Tangents on every parameter and the input, in train mode (the flash
    kernel) and in eval mode (parameters not requiring grad: the fast path),
    against finite differences."""
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True, dtype=R)
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach() for p in layer.parameters()]
    x = torch.randn(B, L, E, dtype=R)
    padding = torch.tensor([[False] * L, [False] * (L - 2) + [True] * 2])

    def fn(x, *ps):
        return torch.func.functional_call(
            layer, dict(zip(names, ps)), (x,), {"src_key_padding_mask": padding}
        )

    check(fn, [x, *params])
    layer.eval()
    check(fn, [x, *params])


def check_hessian_vector_product(f, xs):
    """Forward over reverse (dual inputs, autograd.grad inside the level) against
    central differences of the gradient, float64."""
    vs = [torch.randn_like(t) for t in xs]

    def gradient(xs):
        leaves = [x.detach().clone().requires_grad_() for x in xs]
        return torch.autograd.grad(f(*leaves), leaves)

    leaves = [x.detach().clone().requires_grad_() for x in xs]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in zip(leaves, vs)]
        grads = torch.autograd.grad(f(*duals), leaves)
        hvp = [fwAD.unpack_dual(g).tangent.clone() for g in grads]
    eps = 1e-6
    plus = gradient([x + eps * t for x, t in zip(xs, vs)])
    minus = gradient([x - eps * t for x, t in zip(xs, vs)])
    for h, p, m in zip(hvp, plus, minus):
        torch.testing.assert_close(h, (p - m) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_hessian_vector_product_through_the_flash_kernel():
    """Forward-over-reverse: autograd's backward of the flash kernel
    (_scaled_dot_product_flash_attention_for_cpu_backward) under dual inputs."""
    q, k, v = (torch.randn(B, H, n, E, dtype=R) for n in (L, S, S))

    def f(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True) ** 2).sum()

    check_hessian_vector_product(f, [q, k, v])


def test_dropout_in_the_flash_backward_is_refused():
    """The backward kernel ignores dropout_p; its derivative refuses it."""
    q, k, v = (torch.randn(1, H, n, E, dtype=R) for n in (L, S, S))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    g = torch.randn_like(out)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="only dropout_p=0"):
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            fwAD.make_dual(g, torch.randn_like(g)), q, k, v, out, lse, 0.1, False
        )
