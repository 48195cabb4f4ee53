"""Reference CPU kernels of device-only nn ops, for the tests only:
`cudnn_batch_norm` and `miopen_batch_norm` (native_batch_norm's outputs, the
running statistics updated once; cuDNN adds an empty reserve),
`max_pool2d_backward` (max_pool2d_with_indices_backward at the maxima of self) and
MPS's `_mps_convolution_transpose` (the transposed convolution) with its backward.
"""

from __future__ import annotations

import torch

from .common import check_real_floating


def cudnn_batch_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    exponential_average_factor,
    epsilon,
):
    """(output, save_mean, save_invstd, reserve): native_batch_norm's, the running
    statistics updated in place once, an empty reserve. Arguments are checked
    first, as cuDNN checks them (native_batch_norm's CPU kernel can crash on
    statistics of the wrong length)."""
    channels = input.size(1) if input.dim() >= 2 else -1
    for name, t in (
        ("weight", weight),
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
    ):
        if t is not None and (channels < 0 or t.dim() != 1 or t.numel() != channels):
            raise RuntimeError(
                f"cudnn_batch_norm: {name} must have one element per channel of input"
            )
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("cudnn_batch_norm: evaluation takes running statistics")
    out, mean, invstd = torch.ops.aten.native_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        exponential_average_factor,
        epsilon,
    )
    return out, mean, invstd, torch.empty(0, dtype=torch.uint8)


def miopen_batch_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    exponential_average_factor,
    epsilon,
):
    return cudnn_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        exponential_average_factor,
        epsilon,
    )[:3]


def max_pool2d_backward(
    grad_output, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    """The gradient of max_pool2d: grad_output scattered to where each window's
    maximum is (max_pool2d_with_indices' indices)."""
    _, indices = torch.ops.aten.max_pool2d_with_indices(
        self, kernel_size, stride, padding, dilation, ceil_mode
    )
    return torch.ops.aten.max_pool2d_with_indices_backward(
        grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
    )


def mps_convolution_transpose(
    self, weight, padding, output_padding, stride, dilation, groups
):
    """The transposed convolution, no bias."""
    check_real_floating("_mps_convolution_transpose", self)
    return torch.ops.aten.convolution(
        self, weight, None, stride, padding, dilation, True, output_padding, groups
    )


def mps_convolution_transpose_backward(
    self, grad_output, weight, padding, output_padding, stride, dilation, groups, mask
):
    """(grad_self, grad_weight) of the transposed convolution, each where the mask
    asks for it."""
    check_real_floating("mps_convolution_transpose_backward", self)
    grads = torch.ops.aten.convolution_backward(
        grad_output,
        self,
        weight,
        None,
        stride,
        padding,
        dilation,
        True,
        output_padding,
        groups,
        [mask[0], mask[1], False],
    )
    return grads[0], grads[1]


KERNELS = {
    "cudnn_batch_norm": cudnn_batch_norm,
    "miopen_batch_norm": miopen_batch_norm,
    "max_pool2d_backward": max_pool2d_backward,
    "_mps_convolution_transpose": mps_convolution_transpose,
    "mps_convolution_transpose_backward": mps_convolution_transpose_backward,
}
