"""The rule for MPS's transposed convolution (`_mps_convolution_transpose`, what
conv_transpose2d reaches on Apple GPUs), a device kernel with no CPU kernel, proved
on CPU through the tests' reference (tests/device_references/): its tangent
against native forward AD through conv_transpose2d and central differences in
float64, and forward over reverse against central differences of the gradient."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as fwAD

aten = torch.ops.aten
# Proved on the CPU through its references, whatever the suite's device.
pytestmark = pytest.mark.usefixtures("on_the_cpu")
CASES = {  # self, weight, padding, output_padding, stride, dilation, groups
    "strided-groups": ((2, 4, 3, 3), (4, 3, 2, 2), [1, 0], [1, 0], [2, 2], [1, 1], 2),
    "dilated": ((1, 2, 3, 4), (2, 3, 3, 2), [0, 1], [0, 0], [1, 2], [2, 1], 1),
}


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("case", list(CASES))
def test_mps_convolution_transpose_tangent(backend, case):
    x_shape, w_shape, padding, output_padding, stride, dilation, groups = CASES[case]
    x, w = _rand(*x_shape, seed=1), _rand(*w_shape, seed=2)
    tx, tw = _rand(*x_shape, seed=3), _rand(*w_shape, seed=4)

    def mps(x, w):
        return aten._mps_convolution_transpose(
            x, w, padding, output_padding, stride, dilation, groups
        )

    with fwAD.dual_level():
        out = mps(fwAD.make_dual(x, tx), fwAD.make_dual(w, tw))
        tangent = fwAD.unpack_dual(out).tangent
    with native_fwAD.dual_level():
        native = torch.nn.functional.conv_transpose2d(
            native_fwAD.make_dual(x, tx),
            native_fwAD.make_dual(w, tw),
            None,
            stride,
            padding,
            output_padding,
            groups,
            dilation,
        )
        torch.testing.assert_close(out, native_fwAD.unpack_dual(native).primal)
        torch.testing.assert_close(tangent, native_fwAD.unpack_dual(native).tangent)
    eps = 1e-6
    fd = (mps(x + eps * tx, w + eps * tw) - mps(x - eps * tx, w - eps * tw)) / (2 * eps)
    torch.testing.assert_close(tangent, fd)

    # forward over reverse: the gradient's tangent
    cotangent = _rand(*out.shape, seed=5)

    def gradient(x, w, tangents=None):
        leaves = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        inputs = leaves
        if tangents is not None:
            inputs = [fwAD.make_dual(p, t) for p, t in zip(leaves, tangents)]
        return torch.autograd.grad(mps(*inputs), leaves, cotangent)

    with fwAD.dual_level():
        grads = gradient(x, w, (tx, tw))
        grad_tangents = [fwAD.unpack_dual(g).tangent for g in grads]
    plus, minus = gradient(x + eps * tx, w + eps * tw), gradient(
        x - eps * tx, w - eps * tw
    )
    torch.testing.assert_close(
        grad_tangents, [(p - m) / (2 * eps) for p, m in zip(plus, minus)]
    )
