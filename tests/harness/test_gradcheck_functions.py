"""dualgen.gradcheck through correct custom torch.autograd.Functions, against
torch's: they pass exactly where torch.autograd.gradcheck passes (backward mode runs
the Function's `backward` or `vjp` from dualgen's tape, forward mode its `jvp`),
`jvp` and `backward` are called as many times as torch calls them, and backward
sees torch's needs_input_grad. The Functions are in gradcheck_function_cases.py.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from gradcheck_function_cases import (
    BACKWARD_ONLY,
    BOTH,
    CALLS,
    CORRECT,
    DTYPES,
    F64,
    FAST,
    _fresh_counts_and_no_warnings,  # noqa: F401 - autouse
    rand,
)
from torch.autograd import Function
from torch.utils.checkpoint import checkpoint

import dualgen

# --------------------------------------------------------------------------------------
# 1. correct Functions pass, as in torch


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", [*CORRECT, *BACKWARD_ONLY])
def test_correct_functions_pass_like_torch(name, dtype, fast):
    func, make = {**CORRECT, **BACKWARD_ONLY}[name]
    inputs = make(dtype)
    # Without a jvp, torch's forward mode raises: backward mode (the default) only.
    options = BOTH if name in CORRECT else {}
    assert torch.autograd.gradcheck(func, inputs, fast_mode=fast, **options) is True
    assert dualgen.gradcheck(func, inputs, fast_mode=fast, **options) is True


@pytest.mark.parametrize("name", list(BACKWARD_ONLY))
def test_forward_mode_derives_the_jvp_torch_asks_for(name):
    """Beyond torch: without a jvp, dualgen's forward mode derives one from the
    Function's backward (dualgen.functions), where torch raises."""
    func, make = BACKWARD_ONLY[name]
    inputs = make(F64)
    with pytest.raises(NotImplementedError, match="must implement the jvp"):
        torch.autograd.gradcheck(func, inputs, **BOTH)
    assert dualgen.gradcheck(func, inputs, **BOTH) is True


def test_reentrant_checkpoint_runs_its_function_on_the_tape():
    """torch's reentrant checkpoint cannot run under gradcheck (.grad); dualgen runs
    its function directly, as under a dual level."""

    def func(x):
        return checkpoint(lambda a: a.sin() * a, x, use_reentrant=True)

    assert dualgen.gradcheck(func, (rand(3),), **BOTH) is True


# --------------------------------------------------------------------------------------
# 3. jvp and backward are called as often as torch calls them


def counts(check, func, inputs, **options) -> Counter:
    CALLS.clear()
    assert check(func, inputs, **options)
    return Counter(CALLS)


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", [*CORRECT, *BACKWARD_ONLY])
def test_jvp_and_backward_are_called_as_often_as_by_torch(name, dtype, fast):
    """One jvp per Jacobian column (two per element of a complex input in slow
    mode), one backward per row, twice for the reentrancy check, once for "not
    multiplied by grad_output". dualgen's own extra checks are off: its
    undefined-gradient check is not shaped like torch's, and its adjoint check
    is its own."""
    func, make = {**CORRECT, **BACKWARD_ONLY}[name]
    inputs = make(dtype)
    options = {"fast_mode": fast, "check_undefined_grad": False}
    options["check_forward_ad"] = name in CORRECT
    expected = counts(torch.autograd.gradcheck, func, inputs, **options)
    actual = counts(dualgen.gradcheck, func, inputs, check_adjoint=False, **options)
    assert actual == expected
    assert expected["backward"] > 0 and (expected["jvp"] > 0) == (name in CORRECT)


# --------------------------------------------------------------------------------------
# 5. what backward sees


def test_needs_input_grad_is_torchs_in_forward_and_backward():
    seen = []

    class Record(Function):
        @staticmethod
        def forward(ctx, x, y, k):
            seen.append(("forward", ctx.needs_input_grad))
            ctx.save_for_backward(y)
            ctx.k = k
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            seen.append(("backward", ctx.needs_input_grad))
            (y,) = ctx.saved_tensors
            return g * y * ctx.k, None, None

    def func(x, y):
        return Record.apply(x, y, 2.0)

    inputs = (rand(1), rand(1, seed=1, requires_grad=False))
    expected = {("forward", (True, False, False)), ("backward", (True, False, False))}
    assert torch.autograd.gradcheck(func, inputs)
    assert set(seen) == expected
    seen.clear()
    assert dualgen.gradcheck(func, inputs)
    # (Finite differences run forward on plain tensors: nothing needs a gradient.)
    assert set(seen) - {("forward", (False, False, False))} == expected
