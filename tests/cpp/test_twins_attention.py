"""The C++ twins of dualgen.formulas.attention held to their Python helpers."""

from __future__ import annotations

import pytest
import torch
from twin_checks import F64, rand, same

from dualgen import formulas as py

# (query, key heads, L, S, mask shape or None, is_causal, scale)
CASES = [
    ((2, 2, 3, 4), 2, 5, None, False, None),
    ((1, 4, 4, 4), 2, 3, None, True, 0.7),
    ((2, 2, 3, 4), 2, 5, (3, 5), False, None),
    ((2, 2, 3, 4), 1, 5, (2, 1, 3, 5), True, 0.5),
]


def _case(case, dtype=F64, mask_tangent=True):
    (b, h, l, e), hk, s, mask_shape, causal, scale = case
    q, k, v = (
        rand(b, h, l, e, dtype=dtype),
        rand(b, hk, s, e, dtype=dtype, seed=1),
        rand(b, hk, s, e, dtype=dtype, seed=2),
    )
    mask = None if mask_shape is None else rand(*mask_shape, dtype=dtype, seed=3)
    if mask is not None and mask.dim() == 2:
        mask[1] = float("-inf")  # a row masked everywhere
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, causal, attn_mask=mask, scale=scale
    )
    tangents = [
        rand(*t.shape, dtype=dtype, seed=10 + i) for i, t in enumerate((q, k, v))
    ]
    mt = None
    if mask is not None and mask_tangent:
        mt = rand(*mask.shape, dtype=dtype, seed=20)
    return q, k, v, mask, out, lse, tangents, mt, causal, scale


@pytest.mark.parametrize("dtype", [F64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_flash_attention_tangent(cpp_formulas, dtype, case):
    q, k, v, mask, out, lse, (qt, kt, vt), mt, causal, scale = _case(CASES[case], dtype)
    args = (qt, kt, vt, mt, q, k, v, mask, out, lse, 0.0, causal, scale)
    tol = 1e-12 if dtype == F64 else 1e-5
    same(
        cpp_formulas.flash_attention_tangent(*args),
        py.flash_attention_tangent(*args),
        tol,
    )


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_flash_attention_backward_tangent(cpp_formulas, dtype, index, case):
    q, k, v, mask, out, lse, (qt, kt, vt), mt, causal, scale = _case(CASES[case], dtype)
    g, gt = rand(*out.shape, dtype=dtype, seed=30), rand(
        *out.shape, dtype=dtype, seed=31
    )
    ot, lt = rand(*out.shape, dtype=dtype, seed=32), rand(
        *lse.shape, dtype=dtype, seed=33
    )
    args = (
        index,
        gt,
        qt,
        kt,
        vt,
        ot,
        lt,
        mt,
        g,
        q,
        k,
        v,
        out,
        lse,
        mask,
        0.0,
        causal,
        scale,
    )
    tol = 1e-12 if dtype == F64 else 1e-5
    same(
        cpp_formulas.flash_attention_backward_tangent(*args),
        py.flash_attention_backward_tangent(*args),
        tol,
    )


def test_dropout_is_refused(cpp_formulas):
    q, k, v, mask, out, lse, (qt, kt, vt), mt, causal, scale = _case(CASES[0])
    args = (qt, kt, vt, mt, q, k, v, mask, out, lse, 0.1, causal, scale)
    for fn in (cpp_formulas.flash_attention_tangent, py.flash_attention_tangent):
        with pytest.raises(RuntimeError, match="dropout_p=0.1 draws random numbers"):
            fn(*args)
