"""dualgen.distributed.make_packed_dual in one process: the layout collectives
send as it lies (their behaviour across ranks: tests/distributed), and a dual
that behaves as make_dual's does."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import dualgen.forward_ad as fwAD
from dualgen.collectives.packing import side_by_side
from dualgen.distributed import make_packed_dual


def test_value_then_tangent_in_one_buffer():
    x, t = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4).double()
    with fwAD.dual_level():
        dual = make_packed_dual(x.t(), t.t())  # (non-contiguous: laid out anew)
        primal, tangent = fwAD.unpack_dual(dual)
        assert_close(primal, x.t())
        assert_close(tangent, t.t())
    whole = side_by_side(dual, tangent)  # (as collectives see it: outside the mode)
    assert whole is not None and whole.data_ptr() == dual.data_ptr()
    assert_close(whole, torch.cat([x.t().reshape(-1), t.t().reshape(-1)]))
    assert dual._base is None and dual.data_ptr() != x.data_ptr()


def test_ops_views_and_in_place_ops_as_make_dual():
    x, t = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    results = []
    for make in (fwAD.make_dual, make_packed_dual):
        with fwAD.dual_level():
            dual = make(x.clone(), t.clone())
            dual[1:3].mul_(dual[3:5])
            out = dual.sin() * dual[::2].sum()
            results.append(fwAD.unpack_dual(out))
    assert_close(results[0].primal, results[1].primal)
    assert_close(results[0].tangent, results[1].tangent)


def test_nested_levels_carry_the_outer_tangent():
    x, t, u = (torch.randn(4, dtype=torch.float64) for _ in range(3))
    with fwAD.dual_level(), fwAD.dual_level():
        outer = fwAD.make_dual(x, u, level=0)
        dual = make_packed_dual(outer, t, level=1)
        assert_close(fwAD.unpack_dual(dual, level=0).tangent, u)
        assert_close(fwAD.unpack_dual(dual, level=1).tangent, t)


def test_make_duals_errors():
    x = torch.randn(3)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            make_packed_dual(x, torch.randn(4))
        dual = fwAD.make_dual(x, torch.randn(3))
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            make_packed_dual(dual, torch.randn(3))
        with pytest.raises(ValueError, match="floating point"):
            make_packed_dual(torch.ones(3, dtype=torch.long), torch.randn(3))
