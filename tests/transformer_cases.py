"""The cases of torch's transformer fast paths (_native_multi_head_attention,
_transformer_encoder_layer_fwd) that the tests of their formulas (tests/formulas)
and of the formulas' C++ twins (tests/cpp) share: sizes, masks, the shapes of the
tensor arguments, and the order the ops take their arguments in."""

from __future__ import annotations

import torch

B, T, D, H, FF = 2, 4, 6, 2, 10  # batch, tokens, model width, heads, feed-forward
KEY_PADDING = torch.tensor([[False] * T, [False, False, True, True]])
MASKS = {  # name -> (mask, mask_type)
    "none": (None, None),
    "key_padding": (KEY_PADDING, 1),
    "src_mask": (torch.ones(T, T, dtype=torch.bool).triu(1), 0),
    "float_4d": (
        torch.zeros(B, H, T, T, dtype=torch.float64).index_fill(
            3, torch.tensor([1]), float("-inf")
        ),
        2,
    ),
}
LAYER_MASKS = ["none", "key_padding", "src_mask"]  # the encoder layer's

# query, key, value, in_proj weight and bias, out_proj weight and bias
MHA_SHAPES = [(B, T, D)] * 3 + [(3 * D, D), (3 * D,), (D, D), (D,)]
# src, the attention's four parameters, two layer norms' weights and biases,
# then the feed-forward's two linear layers
LAYER_SHAPES = [(B, T, D), *MHA_SHAPES[3:], *[(D,)] * 4, (FF, D), (FF,), (D, FF), (D,)]


def mha_args(q, k, v, w, b, wo, bo, mask, need_weights, average, mask_type):
    """_native_multi_head_attention's arguments (also the last ones of its
    tangent and gradient helpers)."""
    return (q, k, v, D, H, w, b, wo, bo, mask, need_weights, average, mask_type)


def layer_args(src, params, use_gelu, norm_first, mask, mask_type):
    """_transformer_encoder_layer_fwd's arguments (eps 1e-5) from src and the 12
    parameters of LAYER_SHAPES (also the last ones of its helpers)."""
    attention, rest = params[:4], params[4:]
    return (src, D, H, *attention, use_gelu, norm_first, 1e-5, *rest, mask, mask_type)
