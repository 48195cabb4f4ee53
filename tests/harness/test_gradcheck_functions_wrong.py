"""dualgen.gradcheck through wrong custom torch.autograd.Functions: the same verdict
as torch.autograd.gradcheck in each mode, with the same key phrases; Function.apply
unhooked afterwards.
"""

from __future__ import annotations

import re

import pytest
import torch
from gradcheck_function_cases import (
    BOTH,
    C128,
    DTYPES,
    F64,
    FAST,
    MODES,
    ExpJvp,
    NoMaterialize,
    TorchGradcheckError,
    _fresh_counts_and_no_warnings,  # noqa: F401 - autouse
    counted,
    rand,
    verdict,
)
from torch.autograd.function import _SingleLevelFunction

import dualgen

# --------------------------------------------------------------------------------------
# 2. wrong Functions fail, as in torch


class WrongBackward(ExpJvp):
    @counted("backward")
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 2 * g * y.conj()


class WrongJvp(ExpJvp):
    @counted("jvp")
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return 2 * t * y


class RaisingJvp(ExpJvp):
    @counted("jvp")
    def jvp(ctx, t):
        raise ValueError("jvp is not ready")


class IgnoresGradOutput(ExpJvp):
    @counted("backward")
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y.conj().clone()


class ConjugatedJvp(ExpJvp):
    """Right for real input, wrong for complex."""

    @counted("jvp")
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t.conj() * y


class TooManyGradients(ExpJvp):
    @counted("backward")
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y, g


class UndefinedGradsUnhandled(NoMaterialize):
    """Returns 0, not None, when both gradients are undefined."""

    @counted("backward")
    def backward(ctx, g2, g3):
        return (0 if g2 is None else 2 * g2) + (0 if g3 is None else 3 * g3)

    @counted("jvp")
    def jvp(ctx, t):
        return 2 * t, 3 * t


MISMATCH = r"mismatch for output 0\b.*with respect to input 0"
# name: (function, the mode it is wrong in, dtypes it is wrong for, key phrases)
WRONG = {
    "backward": (WrongBackward.apply, "backward", (F64, C128), [MISMATCH]),
    "jvp": (WrongJvp.apply, "forward", (F64, C128), [MISMATCH, "forward mode"]),
    "raising_jvp": (RaisingJvp.apply, "forward", (F64, C128), ["jvp is not ready"]),
    # On one element a constant gradient is right: only the zero-cotangent check
    # sees that it ignores grad_output (for real input).
    "ignores_grad_output": (
        lambda x: IgnoresGradOutput.apply(x[:1]),
        "backward",
        (F64, C128),
        {F64: ["backward not multiplied by grad_output"], C128: [MISMATCH]},
    ),
    "conjugated_jvp": (
        ConjugatedJvp.apply,
        "forward",
        (C128,),
        [MISMATCH, "forward mode"],
    ),
    "too_many_gradients": (
        TooManyGradients.apply,
        "backward",
        (F64, C128),
        [r"TooManyGradientsBackward returned an incorrect number of gradients"],
    ),
    "undefined_grads_unhandled": (
        lambda x: UndefinedGradsUnhandled.apply(x)[1],
        "backward",
        (F64, C128),
        ["Expected backward function to handle undefined output grads"],
    ),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_functions_get_torchs_verdict(name, dtype, fast, mode):
    func, wrong_in, dtypes, _ = WRONG[name]
    inputs = (rand(3, dtype=dtype),)
    options = {"fast_mode": fast, **MODES[mode]}
    expected = verdict(torch.autograd.gradcheck, func, inputs, **options)
    assert verdict(dualgen.gradcheck, func, inputs, **options) == expected
    checked = MODES[mode][f"check_{wrong_in}_ad"]
    assert (expected is True) == (not checked or dtype not in dtypes)


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_functions_fail_with_torchs_key_phrases(name, dtype, fast):
    func, _, dtypes, phrases = WRONG[name]
    if dtype not in dtypes:
        pytest.skip("right for this dtype")
    if isinstance(phrases, dict):
        phrases = phrases[dtype]
    inputs = (rand(3, dtype=dtype),)
    messages = []
    for check in (torch.autograd.gradcheck, dualgen.gradcheck):
        with pytest.raises(Exception) as info:
            check(func, inputs, fast_mode=fast, **BOTH)
        messages.append((info.type, str(info.value)))
    (torch_type, torch_message), (dualgen_type, dualgen_message) = messages
    assert issubclass(dualgen_type, torch_type)
    for phrase in phrases:
        assert re.search(phrase, torch_message, re.DOTALL), torch_message
        assert re.search(phrase, dualgen_message, re.DOTALL), dualgen_message


def test_apply_is_unhooked_after_gradcheck():
    assert dualgen.gradcheck(ExpJvp.apply, (rand(3),), **BOTH)
    with pytest.raises(TorchGradcheckError):
        dualgen.gradcheck(WrongBackward.apply, (rand(3),))
    assert "apply" not in _SingleLevelFunction.__dict__
