"""The C++ twins of dualgen.helper_basics against their Python helpers."""

from __future__ import annotations

import pytest
import torch

from dualgen import helper_basics as py

# (dim, ndim) as reductions pass them: None or [] for all, lists, one int.
CASES = [(None, 0), ([], 0), (None, 3), ([], 3), ([0], 3), ([-1], 3)]
CASES += [([2, 0], 3), ([-1, -3], 3), (0, 1), (-1, 3), (None, 1), (0, 0)]


@pytest.mark.parametrize("dim, ndim", CASES)
def test_reduction_dims(cpp_formulas, dim, ndim):
    assert cpp_formulas.reduction_dims(dim, ndim) == py.reduction_dims(dim, ndim)


@pytest.mark.parametrize("lo, hi", [(0, 0), (0, 3), (2, 5), (-3, 0), (3, 1)])
def test_dim_range(cpp_formulas, lo, hi):
    assert cpp_formulas.dim_range(lo, hi) == py.dim_range(lo, hi)


@pytest.mark.parametrize("a, b", [([], []), ([0], [2, 3]), ([1, 2], []), ([-1], [4])])
def test_concat_ints(cpp_formulas, a, b):
    assert cpp_formulas.concat_ints(a, b) == py.concat_ints(a, b)


@pytest.mark.parametrize("ndim, axis", [(1, 0), (3, 1), (3, -1), (4, 0), (2, -2)])
def test_channel_shape(cpp_formulas, ndim, axis):
    assert cpp_formulas.channel_shape(ndim, axis) == py.channel_shape(ndim, axis)


def test_refuse_dropout(cpp_formulas):
    assert cpp_formulas.refuse_dropout(0.0, "op") and py.refuse_dropout(0.0, "op")
    for f in (cpp_formulas.refuse_dropout, py.refuse_dropout):
        with pytest.raises(RuntimeError, match="dualgen: op with dropout_p=0.1 draws"):
            f(0.1, "op")


def test_no_derivative(cpp_formulas):
    message = "scatter_reduce: no derivative for reduce='prod'"
    for f in (cpp_formulas.no_derivative, py.no_derivative):
        with pytest.raises(NotImplementedError, match=message):
            f("scatter_reduce", "reduce", "prod")


@pytest.mark.parametrize("lengths", [[3, 1, 0], [5], []])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_lengths_mask(cpp_formulas, lengths, as_tensor):
    like = torch.zeros(4, 2)
    given = torch.tensor(lengths, dtype=torch.long) if as_tensor else lengths
    expected = py.lengths_mask(given, 4, like)
    got = cpp_formulas.lengths_mask(given, 4, like)
    assert got.dtype == expected.dtype and torch.equal(got, expected)


@pytest.mark.parametrize(
    "values", [[0, 3, 5], [], [[1, 2], [3, 4]]], ids=["offsets", "empty", "2-d"]
)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int_list(cpp_formulas, values, dtype):
    t = torch.tensor(values, dtype=dtype)
    assert cpp_formulas.int_list(t) == py.int_list(t) == t.reshape(-1).tolist()
