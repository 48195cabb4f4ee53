"""The C++ twins of dualgen.formulas.shapes held to their Python helpers."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen.formulas import scatter_reduce_tangent

F64, C128 = torch.float64, torch.complex128


def same(cpp, ref):
    assert (cpp is None) == (ref is None)
    assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
    torch.testing.assert_close(cpp, ref, rtol=1e-12, atol=1e-12)


def case(dtype, dim, small_index, ties, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)

    def values(*shape):
        if ties:  # few distinct values, so that amax/amin tie
            return torch.randint(0, 3, shape, generator=g).to(dtype)
        return torch.randn(*shape, dtype=dtype, generator=g)

    self_p, src_p = values(4, 5), values(4, 6)
    along_rows = dim in (0, -2)
    # The index must fit self except along dim, and src.
    index_shape = (3, 4) if small_index else ((4, 5) if along_rows else (4, 6))
    index = torch.randint(0, 4 if along_rows else 5, index_shape, generator=g)
    self_t = torch.randn(4, 5, dtype=dtype, generator=g)
    src_t = torch.randn(4, 6, dtype=dtype, generator=g)
    return self_t, self_p, index, src_t, src_p


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("small_index", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_scatter_reduce_tangent(
    cpp_formulas, reduce, dim, include_self, small_index, ties
):
    self_t, self_p, index, src_t, src_p = case(F64, dim, small_index, ties)
    result = self_p.scatter_reduce(dim, index, src_p, reduce, include_self=include_self)
    for st, tt in [
        (self_t, src_t),
        (self_t, torch.zeros_like(src_p)),
        (torch.zeros_like(self_p), src_t),
    ]:
        args = (st, self_p, dim, index, tt, src_p, reduce, include_self, result)
        same(cpp_formulas.scatter_reduce_tangent(*args), scatter_reduce_tangent(*args))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dim", [1, -2])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_tangent_complex(cpp_formulas, reduce, dim, include_self):
    self_t, self_p, index, src_t, src_p = case(C128, dim, True, False)
    result = self_p.scatter_reduce(dim, index, src_p, reduce, include_self=include_self)
    args = (self_t, self_p, dim, index, src_t, src_p, reduce, include_self, result)
    same(cpp_formulas.scatter_reduce_tangent(*args), scatter_reduce_tangent(*args))


@pytest.mark.parametrize("reduce", ["prod", "max"])
def test_scatter_reduce_tangent_unsupported(cpp_formulas, reduce):
    self_t, self_p, index, src_t, src_p = case(F64, 1, False, False)
    result = self_p
    args = (self_t, self_p, 1, index, src_t, src_p, reduce, True, result)
    with pytest.raises(NotImplementedError) as ref:
        scatter_reduce_tangent(*args)
    with pytest.raises(NotImplementedError) as got:
        cpp_formulas.scatter_reduce_tangent(*args)
    assert str(ref.value) in str(got.value)


def test_resize_tangent(cpp_formulas):
    from dualgen.formulas import resize_tangent

    base = torch.randn(3, 4, dtype=C128)
    for view, size in [(base[1:2], (4,)), (base.expand(2, 3, 4)[1:], (12,))]:
        resized = view.clone().resize_(size)  # only its geometry is read
        py, cpp = view.clone().conj(), view.clone().conj()
        same(cpp_formulas.resize_tangent(cpp, resized), resize_tangent(py, resized))
    grown = torch.zeros(20, dtype=C128)  # more memory than the tangent has
    same(
        cpp_formulas.resize_tangent(base[2:].clone().conj(), grown),
        resize_tangent(base[2:].clone().conj(), grown),
    )
