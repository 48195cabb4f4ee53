"""Zoo cases: pooling and unpooling."""

from __future__ import annotations

from torch import nn

from .common import case

# ---------------------------------------------------------------- pooling


@case("pooling")
def max_pool1d(c):
    return nn.MaxPool1d(2), (c.randn(2, 3, 8),)


@case("pooling", channels_last=True)
def max_pool2d(c):
    return nn.MaxPool2d(3, stride=2, padding=1), (c.randn(2, 3, 7, 6),)


@case("pooling", channels_last=True)
def max_pool3d(c):
    return nn.MaxPool3d(2), (c.randn(1, 2, 4, 4, 4),)


@case("pooling", channels_last=True)
def max_pool2d_indices_unpool(c):
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    def f(x):
        y, i = pool(x)
        return unpool(y, i)

    return f, (c.randn(1, 2, 4, 4),)


@case("pooling")
def max_unpool1d(c):
    pool, unpool = nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2)

    def f(x):
        y, i = pool(x)
        return unpool(y, i)

    return f, (c.randn(1, 2, 6),)


@case("pooling")
def avg_pool1d(c):
    return nn.AvgPool1d(3, stride=2), (c.randn(2, 3, 8),)


@case("pooling", channels_last=True)
def avg_pool2d(c):
    return nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (
        c.randn(2, 3, 7, 6),
    )


@case("pooling", channels_last=True)
def avg_pool3d(c):
    return nn.AvgPool3d(2, ceil_mode=True), (c.randn(1, 2, 5, 4, 4),)


@case("pooling")
def adaptive_avg_pool1d(c):
    return nn.AdaptiveAvgPool1d(3), (c.randn(2, 3, 7),)


@case("pooling", channels_last=True)
def adaptive_avg_pool2d(c):
    return nn.AdaptiveAvgPool2d((3, 2)), (c.randn(2, 3, 7, 5),)


@case("pooling", channels_last=True)
def adaptive_avg_pool3d(c):
    return nn.AdaptiveAvgPool3d(2), (c.randn(1, 2, 5, 4, 3),)


@case("pooling")
def adaptive_max_pool1d(c):
    return nn.AdaptiveMaxPool1d(3), (c.randn(2, 3, 7),)


@case("pooling", channels_last=True)
def adaptive_max_pool2d(c):
    return nn.AdaptiveMaxPool2d((3, 2)), (c.randn(2, 3, 7, 5),)


@case("pooling")
def adaptive_max_pool3d(c):
    return nn.AdaptiveMaxPool3d(2), (c.randn(1, 2, 5, 4, 3),)


@case("pooling")
def lp_pool1d(c):
    return nn.LPPool1d(2, 3), (c.randn(2, 3, 7),)


@case("pooling")
def lp_pool2d(c):
    return nn.LPPool2d(3, 2), (c.randn(2, 3, 6, 6),)


@case("pooling")
def fractional_max_pool2d(c):
    # Random regions: seeded, the same draws in every run.
    return nn.FractionalMaxPool2d(2, output_size=(3, 3)), (c.randn(1, 2, 6, 6),)


@case("pooling")
def fractional_max_pool3d(c):
    return nn.FractionalMaxPool3d(2, output_ratio=0.5), (c.randn(1, 2, 6, 6, 6),)
