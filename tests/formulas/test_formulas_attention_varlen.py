"""The helpers of dualgen.formulas.attention_varlen (torch's varlen attention custom
ops, `torch_attn::_varlen_attn` and its backward) against forward AD and autograd
of the tests' reference flash kernel (attention written out per sequence,
tests/device_references/), packed sequences, float64, with logsumexp in the flash
path's (H, total) layout and in the cuDNN path's (total, H, 1)."""

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


# (q lengths, k lengths, H, Hk, is_causal, window_size)
CASES = [
    ([3, 2], [4, 5], 2, 1, True, None),
    ([2, 4], [5, 4], 2, 2, False, [1, 1]),
    ([4], [6], 2, 2, True, [2, 0]),
]
LAYOUTS = ["flash", "cudnn"]


def _case(case):
    ql, kl, h, hk, causal, window = case
    q = torch.randn(sum(ql), h, 4, dtype=R)
    k, v = (torch.randn(sum(kl), hk, 4, dtype=R) for _ in range(2))
    offsets = [torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()]) for n in (ql, kl)]
    left, right = window if window is not None else (None, None)

    def call(q, k, v):
        return references.flash_forward(
            q,
            k,
            v,
            *offsets,
            max(ql),
            max(kl),
            0.0,
            causal,
            False,
            scale=0.5,
            window_size_left=left,
            window_size_right=right,
        )[:2]

    return (q, k, v), offsets, call, (causal, 0.5, window)


def _laid_out(lse, layout):
    return lse if layout == "flash" else lse.transpose(0, 1).unsqueeze(-1)


def test_window_and_rows():
    assert F.varlen_window(None, 0) == -1 and F.varlen_window(None, 1) == -1
    assert F.varlen_window([3, 0], 0) == 3 and F.varlen_window([3, 0], 1) == 0
    rows = torch.randn(2, 7, dtype=R)
    cudnn = rows.transpose(0, 1).unsqueeze(-1)
    close(F.varlen_rows(cudnn), rows)
    assert F.varlen_rows(rows) is rows and F.varlen_rows(None) is None
    close(F.varlen_rows_like(rows, cudnn), cudnn)
    assert F.varlen_rows_like(rows, rows) is rows


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES)
def test_varlen_forward_tangents_and_grads(case, layout):
    primals, offsets, call, (causal, scale, window) = _case(case)
    tangents = [torch.randn_like(p) for p in primals]
    out, lse = call(*primals)
    with native_fwAD.dual_level():
        duals = call(*(native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
        out_t, lse_t = (native_fwAD.unpack_dual(d).tangent for d in duals)
    laid_out = _laid_out(lse, layout)
    rest = (*offsets, causal, scale, window, None, None)
    got = F.varlen_forward_tangents(*tangents, *primals, out, laid_out, *rest)
    close(got[0], out_t)
    close(got[1], _laid_out(lse_t, layout))
    grads = [torch.randn_like(out), torch.randn_like(lse)]
    got = F.varlen_forward_grads(
        grads[0], _laid_out(grads[1], layout), *primals, out, laid_out, *rest
    )
    close(list(got), list(vjp(call, primals, grads)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES)
def test_varlen_backward_tangent_and_grads(case, layout):
    (q, k, v), offsets, _, (causal, scale, window) = _case(case)
    g, out = torch.randn_like(q), torch.randn_like(q)
    lse = torch.randn(q.shape[1], q.shape[0], dtype=R)
    left, right = window if window is not None else (None, None)
    ql, kl = case[0], case[1]

    def backward(g, q, k, v, out, lse):
        return references.flash_lower_backward(
            g,
            q,
            k,
            v,
            out,
            lse,
            *offsets,
            max(ql),
            max(kl),
            0.0,
            causal,
            None,
            None,
            scale=scale,
            window_size_left=left,
            window_size_right=right,
        )

    primals = [g, q, k, v, out, lse]
    tangents = [torch.randn_like(p) for p in primals]
    with native_fwAD.dual_level():
        duals = backward(
            *(native_fwAD.make_dual(p, t) for p, t in zip(primals, tangents))
        )
        expected = [native_fwAD.unpack_dual(d).tangent for d in duals]
    given = [*primals[:5], _laid_out(lse, layout)]
    given_t = [*tangents[:5], _laid_out(tangents[5], layout)]
    rest = (*offsets, causal, scale, window)
    for index in range(3):
        got = F.varlen_backward_tangent(index, *given_t, *given, *rest)
        close(got, expected[index])
    cotangents = [torch.randn_like(t) for t in (q, k, v)]
    got = F.varlen_backward_grads(*cotangents, *given, *rest)
    expected = list(vjp(backward, primals, cotangents))
    close(list(got[:5]), expected[:5])
    close(got[5], _laid_out(expected[5], layout))
