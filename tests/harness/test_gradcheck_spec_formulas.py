"""The gradcheck harness against wrong spec formulas: kernels generated from a
small spec under test, put in place with `using_kernels`. A wrong forward or
backward formula is caught in its own mode only (slow and fast, real and
complex, or only complex where only the complex formula is wrong), also inside a
composition; a right spec passes and the installed kernels come back afterwards;
the adjoint check (forward against backward, no finite differences) catches
disagreeing formulas and honours its tolerances; formulas wrong in ways finite
differences with default tolerances miss are caught by `check_grad_dtypes` (a
backward in the wrong dtype) and `check_adjoint` (a forward off by 1e-6); the
error raised is torch's GradcheckError.
"""

from __future__ import annotations

import re
import sys

import pytest
import torch
from gradcheck_checks import (
    C128,
    DTYPES,
    F64,
    FAST,
    FORWARD_ONLY,
    kernels_from,
    rand,
    spec_text,
)

import dualgen
from dualgen.rules import using_kernels

TorchGradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError

# op: (backward formula, forward formula), and in which dtypes each is wrong.
WRONG_ENTRIES = {
    "sin": ("grad * self.sin().conj()", "self_t * self_p.cos()"),  # backward wrong
    "cos": ("grad * -self.sin().conj()", "self_t * self_p.sin()"),  # forward wrong
    "exp": ("grad * result", "self_t * result"),  # backward wrong for complex
    "tanh": (  # forward wrong for complex
        "torch.ops.aten.tanh_backward(grad, result)",
        "self_t.conj() * (1 - result * result)",
    ),
}
WRONG_IN = {
    "sin": {"backward": (F64, C128), "forward": ()},
    "cos": {"backward": (), "forward": (F64, C128)},
    "exp": {"backward": (C128,), "forward": ()},
    "tanh": {"backward": (), "forward": (C128,)},
}


@pytest.fixture(scope="module")
def wrong_kernels(tmp_path_factory):
    return kernels_from(tmp_path_factory, "wrong", spec_text(WRONG_ENTRIES))


@pytest.fixture(scope="module")
def right_kernels(tmp_path_factory):
    entries = {
        "sin": ("grad * self.cos().conj()", "self_t * self_p.cos()"),
        "cos": ("grad * -self.sin().conj()", "self_t * -self_p.sin()"),
        "exp": ("grad * result.conj()", "auto_element_wise"),
        "tanh": ("torch.ops.aten.tanh_backward(grad, result)", "auto_element_wise"),
    }
    return kernels_from(tmp_path_factory, "right", spec_text(entries))


def test_spec_kernels_are_the_ones_tested(wrong_kernels):
    names = {info.name for info in wrong_kernels.values()}
    assert {"sin", "cos", "exp", "tanh", "sin_", "mul.Tensor", "alias"} <= names


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("mode", ["backward", "forward"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(WRONG_ENTRIES))
def test_wrong_spec_formula_fails_in_its_mode(wrong_kernels, op, dtype, mode, fast):
    func = getattr(torch, op)
    x = rand(2, 3, dtype=dtype)
    options = {
        "fast_mode": fast,
        "check_backward_ad": mode == "backward",
        "check_forward_ad": mode == "forward",
    }
    wrong = dtype in WRONG_IN[op][mode]
    with using_kernels(wrong_kernels):
        if wrong:
            with pytest.raises(dualgen.GradcheckError) as info:
                dualgen.gradcheck(func, (x,), **options)
            assert f"{mode} mode, in {op}" in str(info.value)
            other = "forward" if mode == "backward" else "backward"
            assert f"{other} mode" not in str(info.value)
        assert dualgen.gradcheck(func, (x,), raise_exception=False, **options) is (
            not wrong
        )


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
def test_right_spec_passes_and_installed_kernels_come_back(
    right_kernels, wrong_kernels, dtype, fast
):
    x = rand(2, 3, dtype=dtype)

    def func(x):
        return x.sin() * x.cos() * x.exp().tanh()

    options = {"fast_mode": fast, "check_forward_ad": True}
    with using_kernels(right_kernels):
        assert dualgen.gradcheck(func, (x,), **options)
        assert dualgen.adjoint_check(func, (x,))
    with using_kernels(wrong_kernels):
        assert not dualgen.gradcheck(func, (x,), raise_exception=False, **options)
    # Outside: the installed kernels again.
    assert dualgen.gradcheck(func, (x,), **options)


def test_wrong_formula_inside_a_composition_is_caught(wrong_kernels):
    x = rand(3)
    with using_kernels(wrong_kernels):
        with pytest.raises(dualgen.GradcheckError, match="forward mode, in <lambda>"):
            dualgen.gradcheck(lambda x: x.cos() * x, (x,), **FORWARD_ONLY)
        assert dualgen.gradcheck(lambda x: x.cos() * x, (x,))  # backward is right


# --------------------------------------------------------------------------------------
# the adjoint check: forward against backward, no finite differences


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(WRONG_ENTRIES))
def test_adjoint_check_catches_disagreeing_formulas(wrong_kernels, op, dtype):
    wrong = dtype in WRONG_IN[op]["forward"] + WRONG_IN[op]["backward"]
    x = rand(2, 3, dtype=dtype)
    func = getattr(torch, op)
    with using_kernels(wrong_kernels):
        if wrong:
            with pytest.raises(dualgen.GradcheckError) as info:
                dualgen.adjoint_check(func, (x,))
            message = str(info.value)
            assert "with respect to input 0 in " + op in message
            assert "the forward and backward formulas disagree" in message
            found = re.findall(
                r"(?:<v, J u>|<J\^T v, u>) by \w+ mode:\s+(\S+)", message
            )
            assert len(found) >= 2 and float(found[0]) != pytest.approx(float(found[1]))
        assert dualgen.adjoint_check(func, (x,), raise_exception=False) is (not wrong)


def test_adjoint_check_tolerances_are_used(wrong_kernels):
    x = rand(3)
    with using_kernels(wrong_kernels):
        assert not dualgen.adjoint_check(torch.cos, (x,), raise_exception=False)
        # A huge tolerance accepts anything.
        assert dualgen.adjoint_check(torch.cos, (x,), atol=1e6)
        assert dualgen.adjoint_check(torch.cos, (x,), rtol=1e6)


# --------------------------------------------------------------------------------------
# subtly wrong formulas: what finite differences with default tolerances miss


@pytest.fixture(scope="module")
def subtle_kernels(tmp_path_factory):
    """Formulas wrong in ways finite differences with default tolerances miss."""
    entries = {
        # backward in the wrong dtype
        "cos": (
            "(grad * -self.sin().conj()).to(torch.float32)",
            "self_t * -self_p.sin()",
        ),
        # forward off by 1e-6 relative: within rtol, not within the adjoint check's
        "sinh": ("grad * self.cosh().conj()", "self_t * self_p.cosh() * 1.000001"),
    }
    return kernels_from(tmp_path_factory, "subtle", spec_text(entries))


@pytest.mark.parametrize("fast", FAST)
def test_check_grad_dtypes(subtle_kernels, fast):
    x = rand(3)
    with using_kernels(subtle_kernels):
        assert dualgen.gradcheck(torch.cos, (x,), fast_mode=fast)
        with pytest.raises(dualgen.GradcheckError, match="dtype mismatch.*float32"):
            dualgen.gradcheck(torch.cos, (x,), fast_mode=fast, check_grad_dtypes=True)
    assert dualgen.gradcheck(torch.cos, (x,), fast_mode=fast, check_grad_dtypes=True)


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_adjoint_catches_what_finite_differences_miss(
    subtle_kernels, dtype, fast
):
    x = rand(3, dtype=dtype)
    both = {"check_forward_ad": True, "check_backward_ad": True, "fast_mode": fast}
    with using_kernels(subtle_kernels):
        assert dualgen.gradcheck(torch.sinh, (x,), check_adjoint=False, **both)
        assert dualgen.gradcheck(torch.sinh, (x,), fast_mode=fast, **FORWARD_ONLY)
        with pytest.raises(dualgen.GradcheckError, match="Adjoint mismatch"):
            dualgen.gradcheck(torch.sinh, (x,), **both)
        assert not dualgen.adjoint_check(torch.sinh, (x,), raise_exception=False)
        assert dualgen.adjoint_check(torch.sinh, (x,), rtol=1e-4)


# --------------------------------------------------------------------------------------
# the error raised


def test_gradcheck_error_is_torchs(wrong_kernels):
    assert issubclass(dualgen.GradcheckError, TorchGradcheckError)
    assert issubclass(dualgen.GradcheckError, RuntimeError)
    with using_kernels(wrong_kernels), pytest.raises(TorchGradcheckError):
        dualgen.gradcheck(torch.sin, (rand(3),))
    with using_kernels(wrong_kernels):
        assert dualgen.gradcheck(torch.sin, (rand(3),), raise_exception=False) is False
        assert (
            dualgen.gradgradcheck(torch.sin, (rand(3),), raise_exception=False) is False
        )
