"""The C++ twins of the grouped-matmul and weight-norm helpers
(fused_nn.grouped_mm_any_layout, nn.weight_norm_broadcast) held to their Python
helpers."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as py_nn
from dualgen.formulas import fused_nn as py

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16


def same(cpp, ref):
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    assert cpp.stride() == ref.stride()
    torch.testing.assert_close(cpp, ref, rtol=0, atol=0)


def rand(*shape, dtype=F32, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=torch.float64, generator=g).to(dtype)


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


LAYOUTS = [
    ((8, 8), (4, 8, 4), offsets(0, 2, 5, 8)),
    ((8, 8), (3, 8, 4), offsets(2, 5, 6)),  # rows past the last group
    ((3, 5, 8), (3, 8, 4), None),
    ((4, 8), (8, 4), offsets(0, 2, 5, 8)),
    ((4, 8), (8, 4), offsets(3, 3, 6)),
    ((4, 4, 8), (8, 8), offsets(0, 2, 5, 8)),
    ((3, 4, 8), (8, 8), offsets(1, 4, 5)),  # columns past the last group
]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
def test_grouped_mm_any_layout(cpp_formulas, layout, dtype):
    a_shape, b_shape, offs = LAYOUTS[layout]
    a, b = rand(*a_shape, dtype=dtype), rand(*b_shape, dtype=dtype, seed=1)
    same(
        cpp_formulas.grouped_mm_any_layout(a, b, offs),
        py.grouped_mm_any_layout(a, b, offs),
    )
    # Layouts the op refuses: rows of 5, stride 0, column-major with 5 rows.
    odd = rand(*b_shape[:-1], 5, dtype=dtype, seed=2)
    same(
        cpp_formulas.grouped_mm_any_layout(a, odd, offs),
        py.grouped_mm_any_layout(a, odd, offs),
    )
    expanded = rand(1, b_shape[-1], dtype=dtype, seed=3).expand(b_shape)
    transposed = a.transpose(-2, -1).contiguous().transpose(-2, -1)
    same(
        cpp_formulas.grouped_mm_any_layout(transposed, expanded, offs),
        py.grouped_mm_any_layout(transposed, expanded, offs),
    )


@pytest.mark.parametrize(
    "shape, dim",
    [((4, 3, 5), 0), ((4, 3, 5), 2), ((4, 3, 5), -2), ((4, 4), 1), ((4, 3), -1)],
)
def test_weight_norm_broadcast(cpp_formulas, shape, dim):
    v = rand(*shape, dtype=F64)
    t = rand(1 if dim == -1 else shape[dim], dtype=F64, seed=1)
    same(
        cpp_formulas.weight_norm_broadcast(t, v, dim),
        py_nn.weight_norm_broadcast(t, v, dim),
    )


@pytest.mark.parametrize("dim", [0, 2])
@pytest.mark.parametrize("records", [True, False])
def test_weight_norm_saved(cpp_formulas, dim, records):
    """The saved norms broadcast against v, and where autograd records v, their
    gradient: the twin's and the helper's alike."""
    v = rand(4, 3, 5, dtype=F64)
    norms = torch.norm_except_dim(v, 2, dim)

    def value_and_grad(formulas):
        leaf = v.clone().requires_grad_(records)
        out = formulas.weight_norm_saved(norms, leaf, dim)
        if not records:
            return out, None
        return out.detach(), torch.autograd.grad((out * out).sum(), leaf)[0]

    cpp, ref = value_and_grad(cpp_formulas), value_and_grad(py_nn)
    same(cpp[0], ref[0])
    if records:
        same(cpp[1], ref[1])
