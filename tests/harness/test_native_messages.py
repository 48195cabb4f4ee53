"""dualgen.gradcheck's failure messages carry torch.autograd.gradcheck's own words,
so that a test matching torch's message passes with dualgen's: the same wrong
Function fails both, with an exception of torch's type, and the phrase is in both
messages (torch's is checked too, so a change in PyTorch shows up here).
"""

from __future__ import annotations

import pytest
import torch
from autograd_functions import function, product_forward
from gradcheck_function_cases import (
    C128,
    F64,
    FAST,
    ExpJvp,
    NoisyBackward,
    TorchGradcheckError,
    _fresh_counts_and_no_warnings,  # noqa: F401 - autouse
    rand,
)
from torch.autograd import Function

import dualgen

BACKWARD = {"check_forward_ad": False, "check_backward_ad": True}
FORWARD = {"check_forward_ad": True, "check_backward_ad": False}
UNDEFINED_NOTE = (
    'Please look at "Notes about undefined output gradients" in '
    '"tools/autograd/derivatives.yaml"'
)


def messages(func, inputs, **options) -> tuple[str, str]:
    """torch's message and dualgen's, for a func both must reject."""
    errors = []
    for check in (torch.autograd.gradcheck, dualgen.gradcheck):
        with pytest.raises(RuntimeError) as info:
            check(func, inputs, **options)
        errors.append(info.value)
    native, ours = errors
    assert type(native) is TorchGradcheckError, repr(native)
    assert isinstance(ours, type(native)), repr(ours)
    return str(native), str(ours)


def assert_both_say(phrase: str, func, inputs, **options) -> str:
    """The phrase is in torch's message and in dualgen's; returns dualgen's."""
    native, ours = messages(func, inputs, **options)
    assert phrase in native, native
    assert phrase in ours, ours
    return ours


# --------------------------------------------------------------------------------------
# Functions: exp (ExpJvp, right), wrong in one place each (complex: the conjugate
# convention in backward)


class DoubledBackward(ExpJvp):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 2 * g * y.conj()


class DoubledJvp(ExpJvp):
    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return 2 * t * y


class WrongForRealCotangents(ExpJvp):
    """Wrong for the real part of a complex output only (its cotangent is real)."""

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (2 * g.real + 1j * g.imag) * y.conj()


class WrongForImaginaryCotangents(ExpJvp):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (g.real + 2j * g.imag) * y.conj()


class WrongForRealTangents(ExpJvp):
    """Wrong along the real axis of a complex input only."""

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return (2 * t.real + 1j * t.imag) * y


class WrongForImaginaryTangents(ExpJvp):
    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return (t.real + 2j * t.imag) * y


class IgnoresGradOutput(ExpJvp):
    """Right for a cotangent of 1 on one element, whatever the cotangent."""

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y.clone()


class RaisesOnUndefinedGrad(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if g is None:
            raise RuntimeError("no gradient to scale")
        return 2 * g


class OnesFromUndefinedGrad(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.like = x.detach()
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return torch.ones_like(ctx.like) if g is None else 2 * g


class MulOffWithoutTangent(Function):
    """x * y, whose jvp is off by 1e-4 (relative) when x has no tangent: within
    gradcheck's rtol, so only the undefined-tangent check sees it."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x

    @staticmethod
    def jvp(ctx, tx, ty):
        x, y = ctx.saved_tensors
        if tx is None:
            return ty * x * (1 + 1e-4)
        return tx * y if ty is None else tx * y + ty * x


SIGNS = 100 * torch.tensor([1.0, -1.0], dtype=F64).repeat(50)


class AlmostRightBackward(Function):
    """x * SIGNS, whose backward is off by 0.09 on each element: within the
    element-wise tolerance (0.1), but the alternating signs cancel in v^T J u,
    not the error, so fast mode fails where slow mode passes."""

    @staticmethod
    def forward(ctx, x):
        return x * SIGNS

    @staticmethod
    def backward(ctx, g):
        return g * (SIGNS + 0.09)


# --------------------------------------------------------------------------------------
# Jacobian mismatches, slow and fast


@pytest.mark.parametrize("fast", FAST)
def test_backward_mismatch(fast):
    phrase = "Jacobian mismatch for output 0 with respect to input 0,"
    ours = assert_both_say(
        phrase, DoubledBackward.apply, (rand(3),), fast_mode=fast, **BACKWARD
    )
    assert ours.startswith(phrase + " backward mode, in apply\n")


@pytest.mark.parametrize("fast", FAST)
def test_forward_mismatch(fast):
    phrase = "Jacobian computed with forward mode mismatch for output 0 with respect "
    phrase += "to input 0,"
    ours = assert_both_say(
        phrase, DoubledJvp.apply, (rand(3),), fast_mode=fast, **FORWARD
    )
    assert ours.startswith(phrase + " forward mode, in apply\n")


COMPLEX_CASES = {
    # name: (function, options, the part torch names, the part it must not name)
    "real_part_of_outputs": (
        WrongForRealCotangents.apply,
        BACKWARD,
        "real part of complex outputs",
        "imaginary part",
    ),
    "imaginary_part_of_outputs": (
        WrongForImaginaryCotangents.apply,
        BACKWARD,
        "imaginary part of complex outputs",
        "real part",
    ),
    "real_part_of_inputs": (
        WrongForRealTangents.apply,
        FORWARD,
        "real part of complex inputs",
        "imaginary part of complex inputs",
    ),
    "imaginary_part_of_inputs": (
        WrongForImaginaryTangents.apply,
        FORWARD,
        "imaginary part of complex inputs",
        "real part of complex inputs",
    ),
}


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_complex_mismatch_names_the_part(case, fast):
    func, options, part, other = COMPLEX_CASES[case]
    mode = "computed with forward mode " if options is FORWARD else ""
    phrase = (
        f"While considering the {part} only, Jacobian {mode}mismatch for output 0 "
        "with respect to input 0,"
    )
    ours = assert_both_say(
        phrase, func, (rand(3, dtype=C128),), fast_mode=fast, **options
    )
    assert other not in ours.split("\n\n")[0]


@pytest.mark.parametrize("fast", FAST)
def test_mismatch_numbers_differentiable_inputs_only(fast):
    def func(scale, x):  # scale: no gradient
        return DoubledBackward.apply(x) * scale

    inputs = (rand(3, requires_grad=False, seed=1), rand(3))
    phrase = "Jacobian mismatch for output 0 with respect to input 0,"
    ours = assert_both_say(phrase, func, inputs, fast_mode=fast, **BACKWARD)
    assert ours.endswith("only: in func, input 0 is argument 1.)")


def test_mismatch_numbers_differentiable_outputs_only():
    """Fast mode only: torch's slow mode fails on the integer output before it
    (IndexError)."""

    def func(x):
        return x.argmax(), DoubledBackward.apply(x)

    phrase = "Jacobian mismatch for output 0 with respect to input 0,"
    ours = assert_both_say(phrase, func, (rand(3),), fast_mode=True, **BACKWARD)
    assert ours.endswith("only: in func, output 0 is returned value 1.)")


def test_fast_mode_fails_where_slow_mode_passes():
    x = rand(100)
    assert torch.autograd.gradcheck(AlmostRightBackward.apply, (x,), **BACKWARD)
    assert dualgen.gradcheck(AlmostRightBackward.apply, (x,), **BACKWARD)
    phrase = "Fast gradcheck failed but element-wise differences are small. This "
    phrase += "means that the\ntest might've passed in slow_mode!"
    assert_both_say(phrase, AlmostRightBackward.apply, (x,), fast_mode=True, **BACKWARD)


# --------------------------------------------------------------------------------------
# backward's other checks


@pytest.mark.parametrize("fast", FAST)
def test_not_reentrant(fast):
    phrase = (
        "Backward is not reentrant, i.e., running backward with same input and "
        "grad_output multiple times gives different values, although analytical "
        "gradient matches numerical gradient.The tolerance for nondeterminism was "
        "0.0."
    )
    assert_both_say(phrase, NoisyBackward.apply, (rand(3),), fast_mode=fast)


@pytest.mark.parametrize("fast", FAST)
def test_not_multiplied_by_grad_output(fast):
    def func(x):
        return IgnoresGradOutput.apply(x[:1])

    phrase = "backward not multiplied by grad_output"
    assert_both_say(phrase, func, (rand(3),), fast_mode=fast, **BACKWARD)


def test_undefined_grad_raises():
    phrase = (
        f"Expected backward function to handle undefined output grads. {UNDEFINED_NOTE}"
    )
    ours = assert_both_say(phrase, RaisesOnUndefinedGrad.apply, (rand(3),))
    assert "no gradient to scale" in ours


def test_undefined_grad_gives_a_gradient():
    phrase = (
        "Expected all input grads to be undefined or zero when all output grads are "
        f"undefined or zero. {UNDEFINED_NOTE}"
    )
    assert_both_say(phrase, OnesFromUndefinedGrad.apply, (rand(3),))
    for check in (torch.autograd.gradcheck, dualgen.gradcheck):
        assert check(
            OnesFromUndefinedGrad.apply, (rand(3),), check_undefined_grad=False
        )


# --------------------------------------------------------------------------------------
# forward mode's undefined tangents


def test_undefined_tangent_mismatch():
    inputs = (rand(3), rand(3, seed=1))
    phrase = "Mismatch in tangent values for output with index: "
    native, ours = messages(MulOffWithoutTangent.apply, inputs, **FORWARD)
    assert phrase in native, native
    # torch's message is the tuple of its parts; dualgen's reads as a sentence.
    assert ours.startswith(
        f"{phrase}0 when input: 0 has an undefined tangent value.\n  in apply: "
    )
    assert "Jacobian" not in ours  # within gradcheck's tolerance: only this check
    for check in (torch.autograd.gradcheck, dualgen.gradcheck):
        assert check(
            MulOffWithoutTangent.apply, inputs, check_undefined_grad=False, **FORWARD
        )


@pytest.mark.parametrize("materialize", [True, False])
def test_jvp_gets_the_tangents_torch_passes_in_the_undefined_tangent_check(
    materialize,
):
    """For each input in turn, a zero tangent on it and then none (None, or zeros
    where the Function materializes grads), the others random."""

    def tangents_seen(check) -> list:
        seen = []

        def jvp(ctx, tx, ty):
            seen.append(tuple(t if t is None else t.clone() for t in (tx, ty)))
            x, y = ctx.saved_tensors
            return (0 if tx is None else tx * y) + (0 if ty is None else ty * x)

        Mul = function("Mul", product_forward(materialize), jvp=jvp)
        inputs = (rand(1), rand(1, seed=1))
        assert check(Mul.apply, inputs, **FORWARD)
        undefined_check = slice(2, None)  # after one jvp per Jacobian column
        return seen[undefined_check]

    def shape(seen):
        # None, zero or random: random tangents differ between the two harnesses.
        return [
            tuple(
                None if t is None else ("zero" if t.count_nonzero() == 0 else "random")
                for t in pair
            )
            for pair in seen
        ]

    native = tangents_seen(torch.autograd.gradcheck)
    ours = tangents_seen(dualgen.gradcheck)
    absent = "zero" if materialize else None
    expected = [
        ("zero", "random"),
        (absent, "random"),
        ("random", "zero"),
        ("random", absent),
    ]
    assert shape(native) == shape(ours) == expected


# --------------------------------------------------------------------------------------
# batched checks


class ItemInBackward(ExpJvp):
    """backward reads a value with .item(), which vmap refuses."""

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * g.new_tensor(g.abs().sum().item() * 0 + 1)


def test_batched_grad_refused_under_vmap():
    phrase = "While computing batched gradients, got: "
    ours = assert_both_say(
        phrase, ItemInBackward.apply, (rand(1),), check_batched_grad=True
    )
    assert "gradcheck or gradgradcheck failed while testing batched gradient" in ours
