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
    g = torch.Generator().manual_seed(seed)
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


def test_resize_of_a_dual_beyond_its_memory_is_refused(backend):
    """resize_ that adds memory: its new elements would have no tangent
    (native refuses any resize of a dual)."""
    with fwAD.dual_level():
        x = fwAD.make_dual(_complex(3, seed=0), _complex(3, seed=1))
        with pytest.raises(RuntimeError, match="resize"):
            x.resize_(5)
