"""Helpers of the `dualgen.functional` tests (test_functional_api*.py)."""

from __future__ import annotations

import pytest
import torch

import dualgen.forward_ad as fwAD

F64, C128 = torch.float64, torch.complex128


@pytest.fixture(autouse=True)
def no_level_left_open():
    """Every call leaves no dual level open, errors included."""
    yield
    assert fwAD._current_level == -1


def rand(*shape, dtype=F64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=gen)


def assert_same(ours, theirs):
    """Same structure (a tensor, or tuples of them, nested alike) and values."""
    assert isinstance(ours, torch.Tensor) == isinstance(theirs, torch.Tensor)
    if not isinstance(theirs, torch.Tensor):
        assert type(ours) is type(theirs), (ours, theirs)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        torch.testing.assert_close(ours, theirs)


def as_tuples(result):
    """torch's vectorized forward-mode jacobian nests lists where its reverse mode
    and its documentation have tuples; dualgen's has tuples."""
    if isinstance(result, (list, tuple)):
        return tuple(as_tuples(r) for r in result)
    return result


def outcome(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - any error, compared with torch's
        return type(error), str(error)
    return None


def assert_same_error(ours, theirs):
    expected = outcome(theirs)
    assert expected is not None, "torch computes this: compare values instead"
    assert outcome(ours) == expected


# Inputs shared by several tests (W_CAPTURED: a tensor a function closes over).
X3 = rand(3)
W_CAPTURED = rand(3, seed=9).requires_grad_()


def directions(inputs, seed=5):
    if isinstance(inputs, tuple):
        return tuple(rand(*x.shape, seed=seed + i) for i, x in enumerate(inputs))
    return rand(*inputs.shape, seed=seed)
