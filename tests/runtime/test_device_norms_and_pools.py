"""The rules for cuDNN's and MIOpen's batch norm and for max_pool2d_backward,
device kernels with no CPU kernel, proved on CPU through the tests' references
(tests/device_references/): tangents against native forward AD through the
CPU ops with the same mathematics and against central differences in float64;
batch norm's running statistics updated once by a dual call, as by a plain one."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as fwAD

aten = torch.ops.aten
# Proved on the CPU through its references, whatever the suite's device.
pytestmark = pytest.mark.usefixtures("on_the_cpu")
BATCH_NORMS = {
    "cudnn": aten.cudnn_batch_norm,
    "miopen": aten.miopen_batch_norm,
}


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
@pytest.mark.parametrize("kernel", list(BATCH_NORMS))
def test_batch_norm_tangent_and_running_statistics(backend, kernel, training):
    op = BATCH_NORMS[kernel]
    x, w, b = _rand(4, 3, 5, seed=1), _rand(3, seed=2), _rand(3, seed=3)
    tx, tw, tb = _rand(4, 3, 5, seed=4), _rand(3, seed=5), _rand(3, seed=6)
    mean0, var0 = _rand(3, seed=7), _rand(3, seed=8).abs() + 0.5

    def stats():
        return mean0.clone(), var0.clone()

    plain_mean, plain_var = stats()
    expected_out = op(x, w, b, plain_mean, plain_var, training, 0.1, 1e-5)[0]
    mean, var = stats()
    with fwAD.dual_level():
        args = [fwAD.make_dual(p, t) for p, t in ((x, tx), (w, tw), (b, tb))]
        out = op(*args, mean, var, training, 0.1, 1e-5)[0]
        tangent = fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(out, expected_out)
    # updated once, as by the plain call (not at all in eval)
    torch.testing.assert_close(mean, plain_mean)
    torch.testing.assert_close(var, plain_var)

    native_mean, native_var = stats()
    with native_fwAD.dual_level():
        args = [native_fwAD.make_dual(p, t) for p, t in ((x, tx), (w, tw), (b, tb))]
        native_out = aten.native_batch_norm(
            *args, native_mean, native_var, training, 0.1, 1e-5
        )[0]
        torch.testing.assert_close(tangent, native_fwAD.unpack_dual(native_out).tangent)

    eps = 1e-6
    plus = op(x + eps * tx, w + eps * tw, b + eps * tb, *stats(), training, 0.1, 1e-5)
    minus = op(x - eps * tx, w - eps * tw, b - eps * tb, *stats(), training, 0.1, 1e-5)
    torch.testing.assert_close(tangent, (plus[0] - minus[0]) / (2 * eps))


POOLS = {  # (self shape, kernel_size, stride, padding)
    "2x2": ((2, 3, 6, 6), [2, 2], [2, 2], [0, 0]),
    "3x3-padded": ((1, 2, 5, 7), [3, 3], [2, 2], [1, 1]),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_max_pool2d_backward_tangent(backend, case):
    """Forward over reverse of max_pool2d where the device has only
    max_pool2d_backward: linear in grad_output, constant in self (between ties)."""
    shape, kernel, stride, padding = POOLS[case]
    x = _rand(*shape, seed=9)
    out = torch.nn.functional.max_pool2d(x, kernel, stride, padding)
    g, tg, tx = (
        _rand(*out.shape, seed=10),
        _rand(*out.shape, seed=11),
        _rand(*shape, seed=12),
    )
    call = lambda grad, x: aten.max_pool2d_backward(grad, x, kernel, stride, padding)
    with fwAD.dual_level():
        result = call(fwAD.make_dual(g, tg), fwAD.make_dual(x, tx))
        tangent = fwAD.unpack_dual(result).tangent
    indices = aten.max_pool2d_with_indices(x, kernel, stride, padding)[1]
    with native_fwAD.dual_level():
        native = aten.max_pool2d_with_indices_backward(
            native_fwAD.make_dual(g, tg),
            x,
            kernel,
            stride,
            padding,
            [1, 1],
            False,
            indices,
        )
        torch.testing.assert_close(tangent, native_fwAD.unpack_dual(native).tangent)
    eps = 1e-6
    fd = (call(g + eps * tg, x + eps * tx) - call(g - eps * tg, x - eps * tx)) / (
        2 * eps
    )
    torch.testing.assert_close(tangent, fd)
