"""The C++ twins of dualgen.formulas.transformer held to their Python helpers."""

from __future__ import annotations

import pytest
import torch

from dualgen import formulas as py

F64 = torch.float64


def same(cpp, ref, tol=1e-12):
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=tol, atol=tol)


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=F64, generator=g).to(dtype)


B, T, D, H, FF = 2, 4, 6, 2, 10
KEY_PADDING = torch.tensor([[False] * T, [False, False, True, True]])
MASKS = {
    "none": (None, None),
    "key_padding": (KEY_PADDING, 1),
    "float_4d": (
        torch.zeros(B, H, T, T, dtype=F64).index_fill(
            3, torch.tensor([1]), float("-inf")
        ),
        2,
    ),
    "src_mask": (torch.ones(T, T, dtype=torch.bool).triu(1), 0),
}


def _mha_args(seed=0):
    shapes = [(B, T, D)] * 3 + [(3 * D, D), (3 * D,), (D, D), (D,)]
    primals = [rand(*s, seed=seed + i) for i, s in enumerate(shapes)]
    tangents = [rand(*s, seed=seed + 10 + i) for i, s in enumerate(shapes)]
    return primals, tangents


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize(
    "need_weights, average", [(True, True), (True, False), (False, True)]
)
def test_native_multi_head_attention_tangent(
    cpp_formulas, mask, index, need_weights, average
):
    (q, k, v, w, b, wo, bo), tangents = _mha_args()
    m, mask_type = MASKS[mask]
    args = (
        index,
        *tangents,
        q,
        k,
        v,
        D,
        H,
        w,
        b,
        wo,
        bo,
        m,
        need_weights,
        average,
        mask_type,
    )
    cpp = cpp_formulas.native_multi_head_attention_tangent(*args)
    ref = py.native_multi_head_attention_tangent(*args)
    if ref is None:
        assert cpp is None
    else:
        same(cpp, ref)


def _layer_args(seed=0):
    shapes = [
        (B, T, D),
        (3 * D, D),
        (3 * D,),
        (D, D),
        (D,),
        (D,),
        (D,),
        (D,),
        (D,),
        (FF, D),
        (FF,),
        (D, FF),
        (D,),
    ]
    primals = [rand(*s, seed=seed + i) for i, s in enumerate(shapes)]
    tangents = [rand(*s, seed=seed + 20 + i) for i, s in enumerate(shapes)]
    return primals, tangents


@pytest.mark.parametrize("mask", ["none", "key_padding", "src_mask"])
@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_tangent(cpp_formulas, mask, use_gelu, norm_first):
    (src, *params), tangents = _layer_args()
    m, mask_type = MASKS[mask]
    args = (
        *tangents,
        src,
        D,
        H,
        *params[:4],
        use_gelu,
        norm_first,
        1e-5,
        *params[4:],
        m,
        mask_type,
    )
    same(
        cpp_formulas.transformer_encoder_layer_tangent(*args),
        py.transformer_encoder_layer_tangent(*args),
        1e-10,
    )
