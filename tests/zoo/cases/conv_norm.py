"""Zoo cases: convolution and normalization."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import case

# ---------------------------------------------------------------- convolution


@case("convolution")
def conv1d(c):
    return c.mod(nn.Conv1d(3, 4, 3)), (c.randn(2, 3, 7),)


@case("convolution", channels_last=True)
def conv2d(c):
    return c.mod(nn.Conv2d(3, 4, 3, padding=1)), (c.randn(2, 3, 6, 5),)


@case("convolution", channels_last=True)
def conv2d_params(c):
    return c.with_params(c.mod(nn.Conv2d(3, 4, 3)), c.randn(2, 3, 5, 5))


@case("convolution", channels_last=True)
def conv2d_stride_dil_groups(c):
    m = nn.Conv2d(
        4, 6, 3, stride=2, padding=2, dilation=2, groups=2, padding_mode="reflect"
    )
    return c.mod(m), (c.randn(2, 4, 7, 6),)


@case("convolution")
def conv2d_same_circular(c):
    return c.mod(nn.Conv2d(3, 4, 3, padding="same", padding_mode="circular")), (
        c.randn(1, 3, 5, 5),
    )


@case("convolution", channels_last=True)
def conv3d(c):
    return c.mod(nn.Conv3d(2, 3, 2)), (c.randn(1, 2, 4, 4, 3),)


@case("convolution")
def conv_transpose1d(c):
    return c.mod(nn.ConvTranspose1d(3, 2, 3, stride=2)), (c.randn(2, 3, 5),)


@case("convolution", channels_last=True)
def conv_transpose2d(c):
    m = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2)
    return c.mod(m), (c.randn(2, 4, 4, 3),)


@case("convolution", channels_last=True)
def conv_transpose3d(c):
    return c.mod(nn.ConvTranspose3d(2, 3, 2, stride=2)), (c.randn(1, 2, 3, 2, 3),)


@case("convolution")
def conv2d_unbatched(c):
    return c.mod(nn.Conv2d(3, 4, 3)), (c.randn(3, 5, 5),)


@case("convolution")
def f_conv_tbc(c):
    return torch.conv_tbc, (c.randn(6, 2, 3), c.randn(3, 3, 4), c.randn(4))


# ---------------------------------------------------------------- normalization


@case("normalization")
def batch_norm1d(c):
    return c.mod(nn.BatchNorm1d(4)), (c.randn(5, 4),)


@case("normalization")
def batch_norm1d_3d_eval(c):
    m = c.mod(nn.BatchNorm1d(4))
    c.uniform_(m.running_mean, -1, 1)
    c.uniform_(m.running_var, 0.5, 2)
    return m.eval(), (c.randn(3, 4, 5),)


@case("normalization", channels_last=True)
def batch_norm2d(c):
    return c.mod(nn.BatchNorm2d(3)), (c.randn(2, 3, 4, 4),)


@case("normalization", channels_last=True)
def batch_norm2d_params(c):
    return c.with_params(c.mod(nn.BatchNorm2d(3)), c.randn(2, 3, 4, 4))


@case("normalization", channels_last=True)
def batch_norm2d_eval(c):
    m = c.mod(nn.BatchNorm2d(3))
    c.uniform_(m.running_mean, -1, 1)
    c.uniform_(m.running_var, 0.5, 2)
    return m.eval(), (c.randn(2, 3, 4, 4),)


@case("normalization", channels_last=True)
def batch_norm3d(c):
    return c.mod(nn.BatchNorm3d(2)), (c.randn(2, 2, 3, 3, 2),)


@case("normalization")
def batch_norm3d_eval_params(c):
    m = c.mod(nn.BatchNorm3d(2), train=False)
    return c.with_params(m, c.randn(2, 2, 3, 3, 2))


def _norm_over_the_last_dims(name, norm):
    """Cases `name`: norm (nn.LayerNorm, nn.RMSNorm) over the last dim of a (3, 4, 6)
    input, and `name`_params: over the last two dims, with tangents on its
    parameters too."""

    @case("normalization", name=name)
    def over_the_last_dim(c):
        return c.mod(norm(6)), (c.randn(3, 4, 6),)

    @case("normalization", name=f"{name}_params")
    def over_the_last_two_dims_with_params(c):
        return c.with_params(c.mod(norm([4, 6])), c.randn(3, 4, 6))


_norm_over_the_last_dims("layer_norm", nn.LayerNorm)


@case("normalization")
def layer_norm_no_affine(c):
    return c.mod(nn.LayerNorm(6, elementwise_affine=False, bias=False)), (
        c.randn(3, 6),
    )


@case("normalization", channels_last=True)
def group_norm(c):
    return c.mod(nn.GroupNorm(2, 4)), (c.randn(2, 4, 3, 3),)


@case("normalization")
def group_norm_params(c):
    return c.with_params(c.mod(nn.GroupNorm(3, 6)), c.randn(2, 6, 5))


@case("normalization")
def instance_norm1d(c):
    return c.mod(nn.InstanceNorm1d(3)), (c.randn(2, 3, 6),)


@case("normalization", channels_last=True)
def instance_norm2d_affine_stats(c):
    return c.mod(nn.InstanceNorm2d(3, affine=True, track_running_stats=True)), (
        c.randn(2, 3, 4, 4),
    )


@case("normalization")
def instance_norm3d(c):
    return c.mod(nn.InstanceNorm3d(2)), (c.randn(2, 2, 3, 3, 3),)


_norm_over_the_last_dims("rms_norm", nn.RMSNorm)


@case("normalization", channels_last=True)
def local_response_norm(c):
    return c.mod(nn.LocalResponseNorm(3)), (c.randn(2, 5, 4, 4),)


@case("normalization")
def local_response_norm_3d(c):
    return c.mod(nn.LocalResponseNorm(2)), (c.randn(2, 4, 6),)


@case("normalization")
def f_normalize(c):
    return F.normalize, (c.randn(3, 5),)
