"""In-place view ops of conjugate views of duals (`v = x.conj(); v.squeeze_(0)`).

torch's conjugate fallback runs an in-place view op of a conjugate view on a
resolved copy, resizes self to the new shape and copies the values back, so
dualgen's mode sees `resize_` where native's autograd sees the view op (its
rule: derivatives.yaml's resize_ entry). The tangents of the view and of its
base, and what a later write through the view does to the base's tangent, are
native's.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from devices import DEVICE

import dualgen.forward_ad as fwAD

pytestmark = pytest.mark.filterwarnings(
    "ignore:An output with one or more elements was resized"  # (the fallback's)
)

C128 = torch.complex128

VIEW_OPS = {
    "squeeze_": lambda v: v.squeeze_(),
    "squeeze_dim": lambda v: v.squeeze_(0),
    "squeeze_dims": lambda v: v.squeeze_((0,)),
    "unsqueeze_": lambda v: v.unsqueeze_(1),
    "transpose_": lambda v: v.transpose_(0, 1),
    "swapdims_": lambda v: v.swapdims_(0, 1),
    "t_": lambda v: v.t_(),
    "as_strided_": lambda v: v.as_strided_((3,), (1,), v.storage_offset()),
}

# The base a conj view is taken of: (primal, tangent) -> the viewed tensor.
BASES = {
    "plain": lambda x: x,
    "expanded": lambda x: x.expand(2, 3)[:1],
    "sliced": lambda x: x.expand(2, 3)[1:],
}


def _complex(*shape, seed):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(*shape, dtype=C128, generator=g)


def _run(module, op, base, write):
    """The view's tangent and the base's after `op` on a conj view of `base`
    (and, with `write`, an add_ of another dual through the view)."""
    with module.dual_level():
        x = module.make_dual(_complex(1, 3, seed=0), _complex(1, 3, seed=1))
        v = BASES[base](x).conj()
        VIEW_OPS[op](v)
        if write:
            y = module.make_dual(_complex(*v.shape, seed=2), _complex(*v.shape, seed=3))
            v.add_(y * 2j)
        return (
            v.clone(),
            module.unpack_dual(v).tangent.clone(),
            module.unpack_dual(x).tangent.clone(),
        )


@pytest.mark.parametrize("base", list(BASES))
@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_inplace_view_of_conj_view(backend, op, base):
    got = _run(fwAD, op, base, write=False)
    expected = _run(native_fwAD, op, base, write=False)
    for a, b in zip(got, expected):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_write_after_inplace_view_of_conj_view(backend, op):
    """A write through the view after the view op reaches the base's tangent."""
    got = _run(fwAD, op, "plain", write=True)
    expected = _run(native_fwAD, op, "plain", write=True)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def _squeezed_expanded_row(module):
    """A dual of an expanded, conjugated row (its memory: 2 elements) made a
    (3, 1) view, then squeezed: the fallback's resize_ grows its memory to 3.
    (A fuzzer's program, with a complex64 tangent of a complex128 primal.)"""
    with module.dual_level():
        row = torch.tensor([[1.0 + 2.0j, -0.5 + 1.0j]], dtype=C128)
        tangent = (row.to(torch.complex64) * 3).expand(3, 2).conj()
        x = module.make_dual(row.expand(3, 2).conj(), tangent)
        x.as_strided_((3, 1), (0, 1))
        x.squeeze_(1)
        return x.clone(), module.unpack_dual(x).tangent.clone()


def test_squeeze_that_grows_the_memory(backend):
    got = _squeezed_expanded_row(fwAD)
    expected = _squeezed_expanded_row(native_fwAD)
    for a, b in zip(got, expected):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b)
