"""The rules for the CUDA attention kernels below scaled_dot_product_attention
(`_flash_attention_forward`, `_efficient_attention_forward`: what
torch.nn.attention.varlen and flash-attn style code call), proved on CPU through
reference kernels (tests/device_references/): the tangents of output and
logsumexp against native forward AD through attention written out per sequence
(scores, the mask as the kernels define it, softmax) and against central
differences in float64, in the kernels' layouts ((B, L, H, E), packed sequences,
padded logsumexp rows); causal masks from either corner, sliding windows, ALiBi,
an additive bias with a tangent, grouped-query heads, rows that see no key; both
kernel backends; forward over reverse through their backward kernels
(`_flash_attention_backward`, `_efficient_attention_backward`) against native
forward over reverse through the written-out attention and central differences of
the gradient; what the rules refuse, refused clearly."""

from __future__ import annotations

import math

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as fwAD
from dualgen import formulas as F

aten = torch.ops.aten
# Proved on the CPU through its references, whatever the suite's device.
pytestmark = pytest.mark.usefixtures("on_the_cpu")


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _written_out(q, k, v, bias, scale, seen, slopes, d):
    """out (L, H, E) and logsumexp (H, L) of one sequence, q (L, H, E) and k, v
    (S, Hk, E): softmax(scale q k^T + bias - slopes |d|) v over the keys `seen`
    ((L, S) bools); a row that sees none gives out 0, logsumexp 0. Plain torch
    ops, so native forward AD differentiates it."""
    heads = q.size(1)
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    k = k.repeat_interleave(heads // k.size(0), 0)
    v = v.repeat_interleave(heads // v.size(0), 0)
    s = scale * q @ k.transpose(-2, -1)
    if bias is not None:
        s = s + bias
    if slopes is not None:
        s = s - slopes.view(-1, 1, 1) * d.abs()
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, -1).masked_fill(~seen.any(-1), 0.0)
    out = torch.exp(s - lse.unsqueeze(-1)) @ v
    return out.transpose(0, 1), lse


def _seen(L, S, causal, top_left=False, left=None, right=None):
    """The keys each query sees, with d = j - (i + S - L) (bottom-right)."""
    i, j = torch.arange(L).unsqueeze(1), torch.arange(S).unsqueeze(0)
    d = j - i - (S - L)
    seen = torch.ones(L, S, dtype=torch.bool)
    if causal:
        seen &= (j <= i) if top_left else (d <= 0)
    elif right is not None:
        seen &= d <= right
    if left is not None:
        seen &= d >= -left
    return seen, d.double()


def _match_differences(out_t, lse_t, lse, plus, minus, eps):
    """The tangents of out and logsumexp against central differences of the
    kernel ((out, logsumexp) at +eps and -eps); a row without keys has logsumexp
    +inf and tangent 0. Returns where logsumexp is finite."""
    torch.testing.assert_close(out_t, (plus[0] - minus[0]) / (2 * eps))
    finite = lse.isfinite()
    torch.testing.assert_close(
        lse_t[finite], ((plus[1] - minus[1]) / (2 * eps))[finite]
    )
    assert (lse_t[~finite] == 0).all()
    return finite


# -- _flash_attention_forward --------------------------------------------------------
# (q lengths, k lengths (None: dense, one length each), H, Hk, causal, window, alibi)
FLASH = {
    "plain": ([5, 5], [7, 7], 2, 2, False, None, None),
    "causal-square": ([6], [6], 2, 2, True, None, None),
    "causal-bottom-right": ([3, 3], [7, 7], 2, 2, True, None, None),
    "causal-rows-without-keys": ([7], [3], 2, 2, True, None, None),
    "grouped-query-causal": ([5], [5], 4, 2, True, None, None),
    "window": ([6], [6], 2, 2, False, (2, 1), None),
    "window-causal": ([5], [8], 2, 1, True, (3, None), None),
    "alibi-causal": ([4, 4], [6, 6], 2, 2, True, None, "heads"),
    "alibi-per-batch": ([4, 4], [6, 6], 2, 2, False, None, "batch"),
    "long": ([40], [300], 1, 1, True, None, None),  # key tiles, bottom-right
    "varlen-causal": ([3, 1, 4], [4, 5, 2], 2, 2, True, None, None),
    "varlen-window-used": ([3, 4], [5, 6], 2, 1, False, (1, 1), "used"),
}


def _flash_inputs(case):
    ql, kl, H, Hk, _, window, extra = FLASH[case]
    varlen = case.startswith("varlen")
    E = 4 if case != "long" else 8
    if varlen:
        q_shape, k_shape = (sum(ql), H, E), (sum(kl), Hk, E)
    else:
        q_shape, k_shape = (len(ql), ql[0], H, E), (len(kl), kl[0], Hk, E)
    tensors = [_rand(*s, seed=i) for i, s in enumerate([q_shape, k_shape, k_shape])]
    tangents = [
        _rand(*s, seed=10 + i) for i, s in enumerate([q_shape, k_shape, k_shape])
    ]
    kwargs = {"scale": 0.6}
    if window is not None:
        kwargs["window_size_left"], kwargs["window_size_right"] = window
    if extra == "heads":
        kwargs["alibi_slopes"] = torch.tensor([0.5, 0.25], dtype=torch.float64)
    if extra == "batch":
        kwargs["alibi_slopes"] = torch.tensor([[0.5, 0.25], [0.1, 0.7]]).double()
    used = None
    if extra == "used":
        used = [kl[0] - 2, kl[1] - 1]
        kwargs["seqused_k"] = torch.tensor(used, dtype=torch.int32)
    offsets = None
    if varlen:
        offsets = [
            torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()]).int()
            for lengths in (ql, kl)
        ]
    return tensors, tangents, offsets, kwargs, used


def _flash(case, q, k, v, offsets, kwargs):
    ql, kl, _, _, causal, _, _ = FLASH[case]
    cum_q, cum_k = offsets if offsets is not None else (None, None)
    return aten._flash_attention_forward(
        q, k, v, cum_q, cum_k, max(ql), max(kl), 0.0, causal, False, **kwargs
    )


def _flash_written(case, q, k, v, offsets, kwargs, used):
    """(out, logsumexp) of `_written_out`, sequence by sequence, in the kernel's
    layout (a row without keys: logsumexp 0): plain torch ops, for native AD."""
    ql, kl, _, _, causal, window, _ = FLASH[case]
    left, right = window if window is not None else (None, None)
    slopes = kwargs.get("alibi_slopes")
    outs, lses = [], []
    q_starts = [0, *torch.tensor(ql).cumsum(0).tolist()]
    k_starts = [0, *torch.tensor(kl).cumsum(0).tolist()]
    for b in range(len(ql)):
        if offsets is None:
            qb, kb, vb = q[b], k[b], v[b]
        else:
            k0 = k_starts[b]
            k1 = k_starts[b + 1] if used is None else k0 + used[b]
            qb = q[q_starts[b] : q_starts[b + 1]]
            kb, vb = k[k0:k1], v[k0:k1]
        seen, d = _seen(qb.size(0), kb.size(0), causal, False, left, right)
        slope = slopes if slopes is None or slopes.dim() == 1 else slopes[b]
        o, lse = _written_out(qb, kb, vb, None, 0.6, seen, slope, d)
        outs.append(o)
        lses.append(lse)
    if offsets is None:
        return torch.stack(outs), torch.stack(lses)
    return torch.cat(outs, 0), torch.cat(lses, 1)


def _flash_expected(case, tensors, tangents, offsets, kwargs, used):
    """Native forward AD through `_flash_written`: (out_t, lse_t)."""
    with native_fwAD.dual_level():
        q, k, v = (native_fwAD.make_dual(p, t) for p, t in zip(tensors, tangents))
        out, lse = _flash_written(case, q, k, v, offsets, kwargs, used)
        return (
            native_fwAD.unpack_dual(out).tangent,
            native_fwAD.unpack_dual(lse).tangent,
        )


@pytest.mark.parametrize("case", list(FLASH))
def test_flash_forward_tangents(backend, case):
    tensors, tangents, offsets, kwargs, used = _flash_inputs(case)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(tensors, tangents)]
        out, lse = _flash(case, *duals, offsets, kwargs)[:2]
        out_t, lse_t = (fwAD.unpack_dual(t).tangent for t in (out, lse))
    expected_out_t, expected_lse_t = _flash_expected(
        case, tensors, tangents, offsets, kwargs, used
    )
    torch.testing.assert_close(out_t, expected_out_t)
    torch.testing.assert_close(lse_t, expected_lse_t)

    eps = 1e-6
    plus, minus = (
        _flash(case, *[p + s * t for p, t in zip(tensors, tangents)], offsets, kwargs)
        for s in (eps, -eps)
    )
    finite = _match_differences(out_t, lse_t, lse, plus, minus, eps)
    if case == "causal-rows-without-keys":
        assert not finite.all()


# -- _efficient_attention_forward ----------------------------------------------------
# (q lengths, k lengths, H, custom_mask_type, bias, compute_log_sumexp)
EFFICIENT = {
    "plain": ([5, 5], [7, 7], 2, 0, False, True),
    "bias": ([5, 5], [7, 7], 2, 0, True, True),
    "causal-top-left": ([4], [6], 2, 1, False, True),
    "causal-bottom-right-bias-no-lse": ([4, 4], [6, 6], 2, 2, True, False),
    "long-top-left": ([40], [300], 1, 1, False, True),
    "varlen-bottom-right": ([3, 1, 4], [4, 5, 2], 2, 2, False, True),
    "varlen-no-lse": ([3, 4], [5, 6], 2, 0, False, False),
}


def _efficient_inputs(case):
    ql, kl, H, _, with_bias, _ = EFFICIENT[case]
    varlen = case.startswith("varlen")
    E = 4
    if varlen:
        q_shape, k_shape = (1, sum(ql), H, E), (1, sum(kl), H, E)
    else:
        q_shape, k_shape = (len(ql), ql[0], H, E), (len(kl), kl[0], H, E)
    shapes = [q_shape, k_shape, k_shape]
    if with_bias:
        shapes.append((len(ql), H, ql[0], kl[0]))
    tensors = [_rand(*s, seed=20 + i) for i, s in enumerate(shapes)]
    tangents = [_rand(*s, seed=30 + i) for i, s in enumerate(shapes)]
    offsets = None
    if varlen:
        offsets = [
            torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()]).int()
            for lengths in (ql, kl)
        ]
    return tensors, tangents, offsets


def _efficient(case, q, k, v, bias, offsets):
    ql, kl, _, mask_type, _, lse = EFFICIENT[case]
    cu_q, cu_k = offsets if offsets is not None else (None, None)
    max_q, max_k = (max(ql), max(kl)) if offsets is not None else (None, None)
    return aten._efficient_attention_forward(
        q, k, v, bias, cu_q, cu_k, max_q, max_k, 0.0, mask_type, lse, scale=0.6
    )


def _efficient_written(case, q, k, v, bias):
    """(out, logsumexp) of `_written_out`, sequence by sequence, in the kernel's
    layout (logsumexp padded with zeros to a multiple of 32 rows, or empty): plain
    torch ops, for native AD."""
    ql, kl, _, mask_type, _, compute_lse = EFFICIENT[case]
    varlen = case.startswith("varlen")
    rows = -(-max(ql) // 32) * 32 if compute_lse else 0
    outs, lses = [], []
    q_starts = [0, *torch.tensor(ql).cumsum(0).tolist()]
    k_starts = [0, *torch.tensor(kl).cumsum(0).tolist()]
    for b in range(len(ql)):
        if not varlen:
            parts = q[b], k[b], v[b]
        else:
            q0, q1 = q_starts[b], q_starts[b + 1]
            k0, k1 = k_starts[b], k_starts[b + 1]
            parts = q[0, q0:q1], k[0, k0:k1], v[0, k0:k1]
        L, S = parts[0].size(0), parts[1].size(0)
        seen, d = _seen(L, S, mask_type != 0, top_left=mask_type == 1)
        o, r = _written_out(
            *parts, None if bias is None else bias[b], 0.6, seen, None, d
        )
        outs.append(o)
        lses.append(torch.nn.functional.pad(r, (0, rows - L))[:, :rows])
    out = torch.cat(outs).unsqueeze(0) if varlen else torch.stack(outs)
    return out, torch.stack(lses)


@pytest.mark.parametrize("case", list(EFFICIENT))
def test_efficient_forward_tangents(backend, case):
    with_bias = EFFICIENT[case][4]
    tensors, tangents, offsets = _efficient_inputs(case)
    bias = tensors[3] if with_bias else None
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(tensors, tangents)]
        q, k, v = duals[:3]
        out, lse = _efficient(case, q, k, v, duals[3] if with_bias else None, offsets)[
            :2
        ]
        out_t, lse_t = (fwAD.unpack_dual(t).tangent for t in (out, lse))

    with native_fwAD.dual_level():
        duals = [native_fwAD.make_dual(p, t) for p, t in zip(tensors, tangents)]
        written = _efficient_written(case, *duals[:3], duals[3] if with_bias else None)
        expected_out_t, expected_lse_t = (
            native_fwAD.unpack_dual(t).tangent for t in written
        )
    torch.testing.assert_close(out_t, expected_out_t)
    torch.testing.assert_close(lse_t, expected_lse_t)

    eps = 1e-6
    plus, minus = (
        _efficient(
            case,
            *[p + s * t for p, t in zip(tensors[:3], tangents[:3])],
            None if bias is None else bias + s * tangents[3],
            offsets,
        )
        for s in (eps, -eps)
    )
    _match_differences(out_t, lse_t, lse, plus, minus, eps)


# -- forward over reverse: the backward kernels ---------------------------------------
# The gradient of out taken inside a level (torch's autograd calls the backward
# kernels, `_flash_attention_backward` / `_efficient_attention_backward`): its
# tangent against native forward over reverse through the written-out attention and
# against central differences of the gradient. Not ALiBi or seqused_k (the flash
# backward kernel takes neither, so torch's gradient ignores them), nor efficient
# attention without logsumexp (its backward reads it); "long" for time.
FLASH_BACKWARD = [c for c, v in FLASH.items() if v[6] is None and c != "long"]
EFFICIENT_BACKWARD = [c for c, v in EFFICIENT.items() if v[5] and c != "long-top-left"]


def _gradient_tangents(forward, written, primals, tangents, cotangent):
    """(dualgen's tangents of the gradient, native forward over reverse through
    the written-out path, central differences of the gradient)."""

    def gradient(values, api=None, path=forward):
        leaves = [v.clone().requires_grad_() for v in values]
        inputs = leaves
        if api is not None:
            inputs = [api.make_dual(v, t) for v, t in zip(leaves, tangents)]
        return torch.autograd.grad(path(*inputs), leaves, cotangent)

    with fwAD.dual_level():
        got = [fwAD.unpack_dual(g).tangent for g in gradient(primals, fwAD)]
    with native_fwAD.dual_level():
        grads = gradient(primals, native_fwAD, written)
        expected = [native_fwAD.unpack_dual(g).tangent for g in grads]
    eps = 1e-6
    plus, minus = (
        gradient([p + sign * t for p, t in zip(primals, tangents)])
        for sign in (eps, -eps)
    )
    return got, expected, [(a - b) / (2 * eps) for a, b in zip(plus, minus)]


@pytest.mark.parametrize("case", FLASH_BACKWARD)
def test_flash_forward_over_reverse(backend, case):
    tensors, tangents, offsets, kwargs, used = _flash_inputs(case)
    out_shape = tensors[0].shape[:-1] + tensors[2].shape[-1:]
    got, expected, differences = _gradient_tangents(
        lambda q, k, v: _flash(case, q, k, v, offsets, kwargs)[0],
        lambda q, k, v: _flash_written(case, q, k, v, offsets, kwargs, used)[0],
        tensors,
        tangents,
        _rand(*out_shape, seed=40),
    )
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, differences, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", EFFICIENT_BACKWARD)
def test_efficient_forward_over_reverse(backend, case):
    """The bias's gradient too, where there is a bias (bias_requires_grad)."""
    tensors, tangents, offsets = _efficient_inputs(case)
    with_bias = EFFICIENT[case][4]

    def forward(q, k, v, *bias):
        return _efficient(case, q, k, v, bias[0] if with_bias else None, offsets)[0]

    def written(q, k, v, *bias):
        return _efficient_written(case, q, k, v, bias[0] if with_bias else None)[0]

    out_shape = tensors[0].shape[:-1] + tensors[2].shape[-1:]
    got, expected, differences = _gradient_tangents(
        forward, written, tensors, tangents, _rand(*out_shape, seed=41)
    )
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, differences, rtol=1e-5, atol=1e-6)


# -- what the rules refuse -----------------------------------------------------------


def test_lower_attention_refusals(backend):
    """Dropout through the op (the reference draws a mask, as the kernels do
    inside); a paged cache and efficient attention's window, which the references
    do not compute, through the rules' helpers themselves."""
    q, k, v = (_rand(1, 3, 2, 4, seed=i) for i in range(3))
    with fwAD.dual_level():
        dq = fwAD.make_dual(q, torch.ones_like(q))
        with pytest.raises(RuntimeError, match="dropout_p=0.1"):
            aten._flash_attention_forward(dq, k, v, None, None, 3, 3, 0.1, False, False)
        with pytest.raises(RuntimeError, match="dropout_p=0.1"):
            aten._efficient_attention_forward(
                dq, k, v, None, None, None, None, None, 0.1, 0, True
            )
    out, lse = aten._flash_attention_forward(
        q, k, v, None, None, 3, 3, 0.0, False, False
    )[:2]
    table = torch.zeros(1, 1, dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="block_table"):
        F.flash_forward_tangents(
            q,
            k,
            v,
            q,
            k,
            v,
            out,
            lse,
            None,
            None,
            0.0,
            False,
            None,
            None,
            None,
            None,
            None,
            table,
        )
    with pytest.raises(NotImplementedError, match="window_size"):
        F.efficient_forward_tangents(
            q, k, v, None, q, k, v, None, out, lse, None, None, 0.0, 1, None, None, 2
        )
