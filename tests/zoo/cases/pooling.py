"""Zoo cases: pooling and unpooling."""

from __future__ import annotations

from torch import nn

from .common import case

# ---------------------------------------------------------------- pooling


def _unpooled(pool, unpool):
    """Max pooling over windows of 2 and its unpooling at the indices it gives."""
    pool, unpool = pool(2, return_indices=True), unpool(2)

    def f(x):
        y, i = pool(x)
        return unpool(y, i)

    return f


# name -> (makes the module or function, input shape, also channels-last)
POOLING = {
    "max_pool1d": (lambda: nn.MaxPool1d(2), (2, 3, 8), False),
    "max_pool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1), (2, 3, 7, 6), True),
    "max_pool3d": (lambda: nn.MaxPool3d(2), (1, 2, 4, 4, 4), True),
    "max_pool2d_indices_unpool": (
        lambda: _unpooled(nn.MaxPool2d, nn.MaxUnpool2d),
        (1, 2, 4, 4),
        True,
    ),
    "max_unpool1d": (lambda: _unpooled(nn.MaxPool1d, nn.MaxUnpool1d), (1, 2, 6), False),
    "avg_pool1d": (lambda: nn.AvgPool1d(3, stride=2), (2, 3, 8), False),
    "avg_pool2d": (
        lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (2, 3, 7, 6),
        True,
    ),
    "avg_pool3d": (lambda: nn.AvgPool3d(2, ceil_mode=True), (1, 2, 5, 4, 4), True),
    "adaptive_avg_pool1d": (lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 7), False),
    "adaptive_avg_pool2d": (lambda: nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 7, 5), True),
    "adaptive_avg_pool3d": (lambda: nn.AdaptiveAvgPool3d(2), (1, 2, 5, 4, 3), True),
    "adaptive_max_pool1d": (lambda: nn.AdaptiveMaxPool1d(3), (2, 3, 7), False),
    "adaptive_max_pool2d": (lambda: nn.AdaptiveMaxPool2d((3, 2)), (2, 3, 7, 5), True),
    "adaptive_max_pool3d": (lambda: nn.AdaptiveMaxPool3d(2), (1, 2, 5, 4, 3), False),
    "lp_pool1d": (lambda: nn.LPPool1d(2, 3), (2, 3, 7), False),
    "lp_pool2d": (lambda: nn.LPPool2d(3, 2), (2, 3, 6, 6), False),
    # random regions: seeded, the same draws in every run
    "fractional_max_pool2d": (
        lambda: nn.FractionalMaxPool2d(2, output_size=(3, 3)),
        (1, 2, 6, 6),
        False,
    ),
    "fractional_max_pool3d": (
        lambda: nn.FractionalMaxPool3d(2, output_ratio=0.5),
        (1, 2, 6, 6, 6),
        False,
    ),
}


def _pooling(make, shape):
    return lambda c: (make(), (c.randn(*shape),))


for _name, (_make, _shape, _channels_last) in POOLING.items():
    case("pooling", channels_last=_channels_last, name=_name)(_pooling(_make, _shape))
