"""The C++ twins of dualgen.formulas.quantization held to their Python helpers
(bit for bit: the same aten calls)."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as py

F32, F64 = torch.float32, torch.float64


def same(cpp, ref):
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=0, atol=0)


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def qparams(c, dtype, seed):
    g = torch.Generator(DEVICE).manual_seed(seed)
    s = torch.rand(c, dtype=dtype, generator=g) * 0.1 + 0.01
    z = torch.rand(c, dtype=dtype, generator=g) * 10 - 5
    return s, z


@pytest.mark.parametrize("grad_factor", [1.0, 0.3])
@pytest.mark.parametrize("quant_range", [(0, 15), (-8, 7)])
@pytest.mark.parametrize("shape", [(5, 4), (), (0, 3)])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_per_tensor_tangent(cpp_formulas, dtype, shape, quant_range, grad_factor):
    x = rand(*shape, dtype=dtype) * 2
    s, z = qparams(1, dtype, 1)
    tangents = [rand(*shape, dtype=dtype, seed=2), *qparams(1, dtype, 3)]
    args = (*tangents, x, s, z, *quant_range, grad_factor)
    same(
        cpp_formulas.fake_quantize_learnable_per_tensor_tangent(*args),
        py.fake_quantize_learnable_per_tensor_tangent(*args),
    )


@pytest.mark.parametrize("grad_factor", [1.0, 0.3])
@pytest.mark.parametrize("quant_range", [(0, 15), (-8, 7)])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_per_channel_tangent(cpp_formulas, dtype, axis, quant_range, grad_factor):
    x = rand(3, 4, 5, dtype=dtype) * 2
    c = x.shape[axis]
    s, z = qparams(c, F32, 1)  # native's scales are float32
    tangents = [rand(3, 4, 5, dtype=dtype, seed=2), *qparams(c, F32, 3)]
    args = (*tangents, x, s, z, axis, *quant_range, grad_factor)
    same(
        cpp_formulas.fake_quantize_learnable_per_channel_tangent(*args),
        py.fake_quantize_learnable_per_channel_tangent(*args),
    )
