"""The C++ twins of dualgen.formulas.basics against their Python helpers."""

from __future__ import annotations

import pytest

from dualgen import formulas as py

# (dim, ndim) as reductions pass them: None or [] for all, lists, one int.
CASES = [(None, 0), ([], 0), (None, 3), ([], 3), ([0], 3), ([-1], 3)]
CASES += [([2, 0], 3), ([-1, -3], 3), (0, 1), (-1, 3), (None, 1), (0, 0)]


@pytest.mark.parametrize("dim, ndim", CASES)
def test_reduction_dims(cpp_formulas, dim, ndim):
    assert cpp_formulas.reduction_dims(dim, ndim) == py.reduction_dims(dim, ndim)
