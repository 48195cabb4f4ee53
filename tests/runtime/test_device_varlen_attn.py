"""torch.nn.attention.varlen.varlen_attn: a custom op (`torch_attn::_varlen_attn`),
so the dispatch mode sees it whole, not the flash kernel inside; its rules come
from specs/torch_custom_ops.yaml (dualgen.generated.torch_custom_ops, loaded once
torch.nn.attention.varlen is imported). Proved on CPU through the flash kernel's
reference (tests/device_references/): the output's and logsumexp's tangents
against native forward AD through attention written out per sequence and central
differences; forward over reverse through `_varlen_attn_backward` against native
forward over reverse through the written-out attention and central differences of
the gradient; logsumexp in cuDNN's (total, H, 1) layout read as flash's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from test_device_attention_lower import (
    _gradient_tangents,
    _match_differences,
    _rand,
    _seen,
    _written_out,
)
from torch.nn.attention.varlen import AuxRequest, varlen_attn

import dualgen.forward_ad as fwAD
from dualgen import formulas as F

pytestmark = pytest.mark.usefixtures("on_the_cpu")

# (q lengths, k lengths, H, Hk, window_size; (-1, 0) is causal)
CASES = {
    "plain": ([3, 4], [5, 6], 2, 2, (-1, -1)),
    "causal": ([3, 1, 4], [4, 5, 2], 2, 2, (-1, 0)),
    "window": ([4, 5], [6, 5], 2, 2, (1, 1)),
    "grouped-query-causal-window": ([5, 3], [5, 6], 4, 2, (2, 0)),
}


def _inputs(case):
    ql, kl, H, Hk, _ = CASES[case]
    shapes = [(sum(ql), H, 4), (sum(kl), Hk, 4), (sum(kl), Hk, 4)]
    tensors = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    tangents = [_rand(*s, seed=10 + i) for i, s in enumerate(shapes)]
    offsets = [
        torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()]).int() for n in (ql, kl)
    ]
    return tensors, tangents, offsets


def _varlen(case, q, k, v, offsets):
    ql, kl, H, Hk, window = CASES[case]
    return varlen_attn(
        q,
        k,
        v,
        *offsets,
        max(ql),
        max(kl),
        return_aux=AuxRequest(lse=True),
        scale=0.6,
        window_size=window,
        enable_gqa=H != Hk,
    )


def _written(case, q, k, v):
    """(out (total, H, E), logsumexp (H, total), as the flash path returns it)
    sequence by sequence, plain ops."""
    ql, kl, _, _, (left, right) = CASES[case]
    causal = (left, right) == (-1, 0)
    left = None if left < 0 else left
    right = None if right < 0 or causal else right
    outs, lses = [], []
    q0 = k0 = 0
    for lq, lk in zip(ql, kl):
        seen, d = _seen(lq, lk, causal, False, left, right)
        out, lse = _written_out(
            q[q0 : q0 + lq], k[k0 : k0 + lk], v[k0 : k0 + lk], None, 0.6, seen, None, d
        )
        outs.append(out)
        lses.append(lse)
        q0, k0 = q0 + lq, k0 + lk
    return torch.cat(outs, 0), torch.cat(lses, 1)


@pytest.mark.parametrize("case", list(CASES))
def test_varlen_attn_tangents(backend, case):
    tensors, tangents, offsets = _inputs(case)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(tensors, tangents)]
        out, lse = _varlen(case, *duals, offsets)
        out_t, lse_t = (fwAD.unpack_dual(t).tangent for t in (out, lse))
    with native_fwAD.dual_level():
        duals = [native_fwAD.make_dual(p, t) for p, t in zip(tensors, tangents)]
        expected = [native_fwAD.unpack_dual(t).tangent for t in _written(case, *duals)]
    torch.testing.assert_close(out_t, expected[0])
    torch.testing.assert_close(lse_t, expected[1])
    eps = 1e-6
    plus, minus = (
        _varlen(case, *[p + s * t for p, t in zip(tensors, tangents)], offsets)
        for s in (eps, -eps)
    )
    _match_differences(out_t, lse_t, lse, plus, minus, eps)


@pytest.mark.parametrize("case", list(CASES))
def test_varlen_attn_forward_over_reverse(backend, case):
    tensors, tangents, offsets = _inputs(case)
    got, expected, differences = _gradient_tangents(
        lambda q, k, v: _varlen(case, q, k, v, offsets)[0],
        lambda q, k, v: _written(case, q, k, v)[0],
        tensors,
        tangents,
        _rand(*tensors[0].shape[:-1], tensors[2].shape[-1], seed=40),
    )
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, differences, rtol=1e-5, atol=1e-6)


def test_cudnn_layout_of_logsumexp_is_read_as_flash_rows():
    # The cuDNN path returns logsumexp as (total, H, 1), flash as (H, total): the
    # tangents come out in the layout given, the same numbers.
    tensors, tangents, offsets = _inputs("causal")
    q, k, v = tensors
    out, lse = torch.ops.torch_attn._varlen_attn(
        q, k, v, *offsets, 4, 5, True, 0.6, [-1, 0]
    )[:2]
    args = (*tangents, q, k, v, out)
    rest = (*offsets, True, 0.6, [-1, 0], None, None)
    flash = F.varlen_forward_tangents(*args, lse, *rest)
    cudnn_lse = lse.transpose(0, 1).unsqueeze(-1)
    cudnn = F.varlen_forward_tangents(*args, cudnn_lse, *rest)
    assert cudnn[1].shape == cudnn_lse.shape
    torch.testing.assert_close(cudnn[0], flash[0])
    torch.testing.assert_close(F.varlen_rows(cudnn[1]), flash[1])
    torch.testing.assert_close(F.varlen_rows_like(flash[1], cudnn_lse), cudnn[1])
    assert F.varlen_window(None, 0) == -1 and F.varlen_window([3, 0], 1) == 0


def test_validate_the_custom_ops_spec(capsys, monkeypatch):
    # Every check of `dualgen validate` on specs/torch_custom_ops.yaml, through the
    # flash kernel's CPU reference (the session registered it; validate's
    # --import of tests.device_references does so outside the tests).
    from dualgen.tools.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    argv = ["validate", "--no-progress", "--spec", "specs/torch_custom_ops.yaml"]
    assert main([*argv, "--import", "torch.nn.attention.varlen"]) == 0
    assert "2 kernels: 2 pass, 0 fail" in capsys.readouterr().out
