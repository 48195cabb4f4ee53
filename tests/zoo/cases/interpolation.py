"""Zoo cases: interpolation and upsampling."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from .common import case

# ---------------------------------------------------------------- interpolation


# name -> (input shape, also channels-last, F.interpolate's keywords)
INTERPOLATE = {
    "interp_nearest_1d": ((2, 3, 5), False, {"scale_factor": 2}),
    "interp_nearest_2d": ((2, 3, 4, 5), True, {"size": (7, 3)}),
    "interp_nearest_3d": ((1, 2, 3, 4, 2), False, {"scale_factor": 1.5}),
    "interp_nearest_exact_2d": (
        (2, 3, 4, 5),
        True,
        {"size": (7, 3), "mode": "nearest-exact"},
    ),
    "interp_nearest_exact_1d": ((2, 3, 5), False, {"size": 8, "mode": "nearest-exact"}),
    "interp_linear": ((2, 3, 5), False, {"scale_factor": 2, "mode": "linear"}),
    "interp_bilinear": ((2, 3, 4, 5), True, {"size": (7, 3), "mode": "bilinear"}),
    "interp_bilinear_align_corners": (
        (2, 3, 4, 5),
        False,
        {"scale_factor": 2, "mode": "bilinear", "align_corners": True},
    ),
    "interp_bicubic": ((2, 3, 4, 5), True, {"size": (7, 6), "mode": "bicubic"}),
    "interp_trilinear": (
        (1, 2, 3, 4, 2),
        True,
        {"scale_factor": 2, "mode": "trilinear"},
    ),
    "interp_area": ((2, 3, 8, 6), True, {"size": (3, 4), "mode": "area"}),
    "interp_area_1d": ((2, 3, 7), False, {"size": 3, "mode": "area"}),
    "interp_bilinear_antialias": (
        (2, 3, 8, 9),
        True,
        {"size": (3, 4), "mode": "bilinear", "antialias": True},
    ),
    "interp_bicubic_antialias": (
        (2, 3, 8, 9),
        True,
        {"size": (3, 4), "mode": "bicubic", "antialias": True},
    ),
}


def _interpolate(shape, keywords):
    return lambda c: ((lambda x: F.interpolate(x, **keywords)), (c.randn(*shape),))


for _name, (_shape, _channels_last, _keywords) in INTERPOLATE.items():
    case("interpolation", channels_last=_channels_last, name=_name)(
        _interpolate(_shape, _keywords)
    )


@case("interpolation")
def upsample_module(c):
    return nn.Upsample(scale_factor=2, mode="bilinear"), (c.randn(1, 2, 3, 3),)
