"""The gradcheck harness against wrong user JVP rules (`register_jvp` on a custom
op): each is caught in forward mode, in the dtypes it is wrong in (a rule that
misses holomorphy only for complex), slow and fast; the failure messages name
the output, input, mode and function, the worst element and its numerical and
analytical values (both parts for complex); `check_undefined_grad` catches a
tangent from a zero tangent.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from gradcheck_checks import C128, DTYPES, F64, FAST, FORWARD_ONLY, rand

import dualgen

torch.library.define("dgtest_gc::mysin", "(Tensor x) -> Tensor")


@torch.library.impl("dgtest_gc::mysin", "CompositeExplicitAutograd")
def _mysin_impl(x):
    return torch.sin(x)


mysin = torch.ops.dgtest_gc.mysin.default


def correct_rule(x_p, x_t):
    return x_t * x_p.cos()


def doubled_rule(x_p, x_t):
    return 2 * x_t * x_p.cos()


def conj_rule(x_p, x_t):  # right for real input; not holomorphic: wrong for complex
    return x_t * x_p.cos().conj()


@pytest.fixture
def jvp_rule():
    """register(rule): the JVP rule of mysin for this test only."""

    def register(rule):
        dualgen.register_jvp(mysin)(rule)

    yield register
    dualgen.unregister_jvp(mysin)


def mysin_twice(x):
    return mysin(x) * 2


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "rule,wrong_for",
    [
        pytest.param(correct_rule, (), id="correct"),
        pytest.param(doubled_rule, (F64, C128), id="doubled"),
        pytest.param(conj_rule, (C128,), id="conj"),
    ],
)
def test_user_rule_verdict(jvp_rule, rule, wrong_for, dtype, fast):
    jvp_rule(rule)
    x = rand(2, 3, dtype=dtype)
    if dtype in wrong_for:
        with pytest.raises(dualgen.GradcheckError, match="forward mode"):
            dualgen.gradcheck(mysin_twice, (x,), fast_mode=fast, **FORWARD_ONLY)
        verdict = dualgen.gradcheck(
            mysin_twice, (x,), fast_mode=fast, raise_exception=False, **FORWARD_ONLY
        )
        assert verdict is False
    else:
        assert dualgen.gradcheck(mysin_twice, (x,), fast_mode=fast, **FORWARD_ONLY)


def exp_and_mysin(a, b):
    return a.exp(), mysin(b)


def _values(message: str, label: str) -> list[complex]:
    return [
        complex(v) for v in re.findall(rf"^  {label}:\s+(\S+)$", message, re.MULTILINE)
    ]


def _failure_message(fast: bool, dtype) -> tuple[str, torch.Tensor]:
    a, b = rand(2, 3), rand(2, 3, dtype=dtype, seed=1)
    with pytest.raises(dualgen.GradcheckError) as info:
        dualgen.gradcheck(exp_and_mysin, (a, b), fast_mode=fast, **FORWARD_ONLY)
    return str(info.value), b.detach()


# How the message of a wrong rule for mysin in exp_and_mysin starts (torch's words).
MISMATCH = (
    "Jacobian computed with forward mode mismatch for output 1 with respect to "
    "input 1, forward mode, in exp_and_mysin"
)


def test_slow_failure_message_names_the_worst_element(jvp_rule):
    jvp_rule(doubled_rule)
    message, b = _failure_message(False, F64)
    assert message.startswith(MISMATCH)
    assert "input 0" not in message and "output 0" not in message
    assert "backward mode" not in message
    where = re.search(
        r"worst element: input 1\[(\d), (\d)\] -> output 1\[(\d), (\d)\]", message
    )
    assert where, message
    i, j, k, m = map(int, where.groups())
    assert (i, j) == (k, m)  # the Jacobian of an element-wise op is diagonal
    # The error is |cos b| on the diagonal: largest where |cos b| is.
    assert (i, j) == divmod(int(b.cos().abs().argmax()), 3)
    (numerical,) = _values(message, "numerical")
    (analytical,) = _values(message, "analytical")
    assert numerical.real == pytest.approx(math.cos(b[i, j]), rel=1e-6)
    assert analytical.real == pytest.approx(2 * math.cos(b[i, j]), rel=1e-6)


def test_fast_failure_message_has_both_scalars_and_locates(jvp_rule):
    jvp_rule(doubled_rule)
    message, _ = _failure_message(True, F64)
    # torch's words in fast mode too: its fast mode names no scalar.
    assert message.startswith(MISMATCH + "\n  fast mode, the scalar v^T J u")
    numerical = _values(message, "numerical")
    analytical = _values(message, "analytical")
    # The fast scalar v^T J u, then the slow run's worst element: both doubled.
    assert len(numerical) == len(analytical) == 2
    assert analytical[0] == pytest.approx(2 * numerical[0], rel=1e-6)
    assert analytical[1] == pytest.approx(2 * numerical[1], rel=1e-6)
    assert abs(numerical[0]) > 1e-3
    assert "Slow mode, run to locate the mismatch" in message
    assert "worst element: input 1[" in message


def test_complex_failure_message_names_both_parts(jvp_rule):
    jvp_rule(conj_rule)
    message, _ = _failure_message(False, C128)
    # conj(f') is right in d/da of the output's real part and d/db of its imaginary
    # part: wrong in d/db of the real part, d/da of the imaginary part (torch's
    # "imaginary part of complex inputs" check, then its "real part" check).
    mismatch = "While considering the {} part of complex inputs only, "
    mismatch += MISMATCH + "\n  worst element: input 1["
    first, second = message.split("\n\n")
    assert first.startswith(mismatch.format("imaginary"))
    assert "-> output 1 (real part)[" in first.splitlines()[1]
    assert second.startswith(mismatch.format("real"))
    assert "-> output 1 (imaginary part)[" in second.splitlines()[1]
    numerical = _values(message, "numerical")
    analytical = _values(message, "analytical")
    assert len(numerical) == len(analytical) == 2
    # With the 2 * CW convention, for f' = cos(b): the real part's entry is
    # conj(f') against the rule's f', the imaginary part's i conj(f') against i f'.
    assert analytical[0] == pytest.approx(numerical[0].conjugate(), rel=1e-6)
    assert analytical[1] == pytest.approx(-numerical[1].conjugate(), rel=1e-6)


def test_check_undefined_grad_catches_tangent_from_zero_tangent(jvp_rule):
    def affine_at_zero(x_p, x_t):  # right for every nonzero tangent
        return torch.where(x_t.abs().sum() == 0, 1.0, x_t * x_p.cos())

    jvp_rule(affine_at_zero)
    x = rand(3)
    with pytest.raises(dualgen.GradcheckError, match="nonzero tangent"):
        dualgen.gradcheck(mysin, (x,), **FORWARD_ONLY)
    assert dualgen.gradcheck(mysin, (x,), check_undefined_grad=False, **FORWARD_ONLY)
