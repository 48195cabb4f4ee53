"""The C++ twins of dualgen.formulas.transformer held to their Python helpers."""

from __future__ import annotations

import pytest
import transformer_cases as cases
from twin_checks import rand, same

from dualgen import formulas as py


def _primals_tangents(shapes, tangent_seed):
    """Seeded primals (seeds 0, 1, ...) and tangents (tangent_seed, ...)."""
    primals = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    tangents = [rand(*s, seed=tangent_seed + i) for i, s in enumerate(shapes)]
    return primals, tangents


@pytest.mark.parametrize("mask", cases.MASKS)
@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize(
    "need_weights, average", [(True, True), (True, False), (False, True)]
)
def test_native_multi_head_attention_tangent(
    cpp_formulas, mask, index, need_weights, average
):
    (q, k, v, w, b, wo, bo), tangents = _primals_tangents(cases.MHA_SHAPES, 10)
    m, mask_type = cases.MASKS[mask]
    args = (
        index,
        *tangents,
        *cases.mha_args(q, k, v, w, b, wo, bo, m, need_weights, average, mask_type),
    )
    same(
        cpp_formulas.native_multi_head_attention_tangent(*args),
        py.native_multi_head_attention_tangent(*args),
    )


@pytest.mark.parametrize("mask", cases.LAYER_MASKS)
@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_tangent(cpp_formulas, mask, use_gelu, norm_first):
    (src, *params), tangents = _primals_tangents(cases.LAYER_SHAPES, 20)
    args = (
        *tangents,
        *cases.layer_args(src, params, use_gelu, norm_first, *cases.MASKS[mask]),
    )
    same(
        cpp_formulas.transformer_encoder_layer_tangent(*args),
        py.transformer_encoder_layer_tangent(*args),
        1e-10,
    )
