"""Helpers of the `dualgen.functional` tests (test_functional_api*.py); the error
comparison serves test_func_api.py too."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.functional as TF
from devices import DEVICE

import dualgen.forward_ad as fwAD
import dualgen.functional as AF

F64, C128 = torch.float64, torch.complex128


@pytest.fixture(autouse=True)
def no_level_left_open():
    """Every call leaves no dual level open, errors included."""
    yield
    assert fwAD._current_level == -1


def rand(*shape, dtype=F64, seed=0):
    gen = torch.Generator(DEVICE).manual_seed(seed)
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


def errors_are_torchs(cases, *names):
    """A test, to assign to a test_* name: for each case (the keyword arguments of
    a call) and each function named, dualgen.functional's call fails as
    torch.autograd.functional's does. One test body for the modules' error tables."""

    @pytest.mark.parametrize("name", names)
    @pytest.mark.parametrize("case", cases)
    def test(case, name):
        kwargs = cases[case]
        assert_same_error(
            lambda: getattr(AF, name)(**kwargs), lambda: getattr(TF, name)(**kwargs)
        )

    return test


# Inputs shared by several tests (W_CAPTURED: a tensor a function closes over).
X3 = rand(3)
W_CAPTURED = rand(3, seed=9).requires_grad_()


def directions(inputs, seed=5):
    if isinstance(inputs, tuple):
        return tuple(rand(*x.shape, seed=seed + i) for i, x in enumerate(inputs))
    return rand(*inputs.shape, seed=seed)
