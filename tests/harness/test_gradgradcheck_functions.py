"""dualgen.gradgradcheck through custom torch.autograd.Functions: second
derivatives through the Function's backward get torch's verdict (rev-over-rev,
forward-over-reverse), and dualgen's own forward-over-forward and
reverse-over-forward checks pass.
"""

from __future__ import annotations

import pytest
import torch
from gradcheck_function_cases import (
    BACKWARD_ONLY,
    C128,
    CORRECT,
    DTYPES,
    FAST,
    _fresh_counts_and_no_warnings,  # noqa: F401 - autouse
    verdict,
)

import dualgen

# --------------------------------------------------------------------------------------
# 4. second derivatives: through the Function's backward


GRADGRAD = [
    "jvp",
    "vjp_setup_context",
    "default_argument",
    "two_outputs",
    "non_differentiable_outputs",
    "view_output",
    "broadcast_gradient",
    "inside_a_composition",
    "needs_input_grad_x",
    "mark_dirty",  # saves a copy made in forward: wrong second derivative
    "once_differentiable",  # its backward is not differentiable
]


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GRADGRAD + list(BACKWARD_ONLY))
def test_gradgradcheck_gets_torchs_verdict(name, dtype, fast):
    func, make = {**CORRECT, **BACKWARD_ONLY}[name]
    inputs = make(dtype)
    expected = verdict(torch.autograd.gradgradcheck, func, inputs, fast_mode=fast)
    assert verdict(dualgen.gradgradcheck, func, inputs, fast_mode=fast) == expected
    assert expected is (name not in ("mark_dirty", "once_differentiable"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GRADGRAD)
def test_forward_over_reverse_gets_torchs_verdict(name, dtype):
    func, make = CORRECT[name]
    inputs = make(dtype)
    options = {"check_fwd_over_rev": True, "check_rev_over_rev": False}
    options["check_undefined_grad"] = False
    expected = verdict(torch.autograd.gradgradcheck, func, inputs, **options)
    assert verdict(dualgen.gradgradcheck, func, inputs, **options) == expected


@pytest.mark.parametrize("check", ["fwd_over_fwd", "rev_over_fwd"])
@pytest.mark.parametrize("name", GRADGRAD[:-2])
def test_second_order_forward_checks_beyond_torch(name, check):
    """dualgen's own checks of J(x) u: the jvp differentiated by an outer level
    or by the tape (which sees the jvp read the Function's outputs)."""
    func, make = CORRECT[name]
    flags = {f"check_{c}": c == check for c in ("rev_over_rev", "fwd_over_fwd")}
    flags["check_rev_over_fwd"] = check == "rev_over_fwd"
    assert dualgen.gradgradcheck(func, make(C128), check_undefined_grad=False, **flags)
