"""Zoo cases: interpolation and upsampling."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from .common import case

# ---------------------------------------------------------------- interpolation


def _interp(c, shape, **kw):
    return (lambda x: F.interpolate(x, **kw)), (c.randn(*shape),)


@case("interpolation")
def interp_nearest_1d(c):
    return _interp(c, (2, 3, 5), scale_factor=2)


@case("interpolation", channels_last=True)
def interp_nearest_2d(c):
    return _interp(c, (2, 3, 4, 5), size=(7, 3))


@case("interpolation")
def interp_nearest_3d(c):
    return _interp(c, (1, 2, 3, 4, 2), scale_factor=1.5)


@case("interpolation", channels_last=True)
def interp_nearest_exact_2d(c):
    return _interp(c, (2, 3, 4, 5), size=(7, 3), mode="nearest-exact")


@case("interpolation")
def interp_nearest_exact_1d(c):
    return _interp(c, (2, 3, 5), size=8, mode="nearest-exact")


@case("interpolation")
def interp_linear(c):
    return _interp(c, (2, 3, 5), scale_factor=2, mode="linear")


@case("interpolation", channels_last=True)
def interp_bilinear(c):
    return _interp(c, (2, 3, 4, 5), size=(7, 3), mode="bilinear")


@case("interpolation")
def interp_bilinear_align_corners(c):
    return _interp(c, (2, 3, 4, 5), scale_factor=2, mode="bilinear", align_corners=True)


@case("interpolation", channels_last=True)
def interp_bicubic(c):
    return _interp(c, (2, 3, 4, 5), size=(7, 6), mode="bicubic")


@case("interpolation", channels_last=True)
def interp_trilinear(c):
    return _interp(c, (1, 2, 3, 4, 2), scale_factor=2, mode="trilinear")


@case("interpolation", channels_last=True)
def interp_area(c):
    return _interp(c, (2, 3, 8, 6), size=(3, 4), mode="area")


@case("interpolation")
def interp_area_1d(c):
    return _interp(c, (2, 3, 7), size=3, mode="area")


@case("interpolation", channels_last=True)
def interp_bilinear_antialias(c):
    return _interp(c, (2, 3, 8, 9), size=(3, 4), mode="bilinear", antialias=True)


@case("interpolation", channels_last=True)
def interp_bicubic_antialias(c):
    return _interp(c, (2, 3, 8, 9), size=(3, 4), mode="bicubic", antialias=True)


@case("interpolation")
def upsample_module(c):
    return nn.Upsample(scale_factor=2, mode="bilinear"), (c.randn(1, 2, 3, 3),)
