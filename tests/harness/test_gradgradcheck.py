"""dualgen.gradgradcheck: passes on correct functions in each of the four
second-order modes (reverse and forward over reverse and forward), slow and fast,
and agrees with torch.autograd.gradgradcheck; catches a wrong formula of cos
under sin in exactly the modes whose outer pass differentiates through it; given
and non-contiguous grad outputs.
"""

from __future__ import annotations

import pytest
import torch
from gradcheck_checks import C128, DTYPES, FAST, kernels_from, rand, spec_text

import dualgen
from dualgen.rules import using_kernels

GRADGRAD = {
    "matmul_tanh": (
        lambda x, w: (x @ w).tanh().sum(0),
        lambda: (rand(2, 3), rand(3, 2)),
    ),
    "sin_times_x": (lambda x: x.sin() * x, lambda: (rand(3),)),
    "complex_exp": (lambda z: (z.exp() * z).sum(), lambda: (rand(3, dtype=C128),)),
    "softmax": (lambda x: torch.softmax(x, 1), lambda: (rand(2, 3),)),
}
SECOND_ORDER = ["rev_over_rev", "fwd_over_rev", "fwd_over_fwd", "rev_over_fwd"]


def only(check: str) -> dict:
    flags = {f"check_{c}": False for c in SECOND_ORDER}
    flags[f"check_{check}"] = True
    return flags


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("check", SECOND_ORDER)
@pytest.mark.parametrize("name", list(GRADGRAD))
def test_gradgradcheck_passes_on_correct_functions(name, check, fast):
    func, make = GRADGRAD[name]
    assert dualgen.gradgradcheck(func, make(), fast_mode=fast, **only(check)) is True


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("name", list(GRADGRAD))
def test_gradgradcheck_agrees_with_torch(name, fast):
    func, make = GRADGRAD[name]
    inputs = make()
    assert torch.autograd.gradgradcheck(
        func, inputs, fast_mode=fast, check_fwd_over_rev=True
    )
    flags = {f"check_{c}": True for c in SECOND_ORDER}
    assert dualgen.gradgradcheck(func, inputs, fast_mode=fast, **flags)


@pytest.fixture(scope="module")
def second_order_kernels(tmp_path_factory):
    """sin right in both modes; its formulas call cos, whose backward (or forward)
    is wrong: only second derivatives that go through that mode can see it."""
    right_b, right_f = "grad * -self.sin().conj()", "self_t * -self_p.sin()"
    wrong_b, wrong_f = "grad * self.sin().conj()", "self_t * self_p.sin()"
    sin = ("grad * self.cos().conj()", "self_t * self_p.cos()")
    return {
        "cos_backward_wrong": kernels_from(
            tmp_path_factory, "b", spec_text({"sin": sin, "cos": (wrong_b, right_f)})
        ),
        "cos_forward_wrong": kernels_from(
            tmp_path_factory, "f", spec_text({"sin": sin, "cos": (right_b, wrong_f)})
        ),
    }


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["cos_backward_wrong", "cos_forward_wrong"])
def test_gradgradcheck_catches_wrong_second_derivatives(
    second_order_kernels, which, dtype, fast
):
    x = rand(3, dtype=dtype)
    # The outer mode decides which of cos's formulas the second derivative uses:
    # reverse over anything differentiates cos backwards, forward over forwards.
    wrong_outer = "rev" if which == "cos_backward_wrong" else "fwd"
    with using_kernels(second_order_kernels[which]):
        assert dualgen.gradcheck(torch.sin, (x,), check_forward_ad=True)
        for check in SECOND_ORDER:
            expected = not check.startswith(wrong_outer)
            verdict = dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, raise_exception=False, **only(check)
            )
            assert verdict is expected, check
        with pytest.raises(dualgen.GradcheckError, match="in backward of sin"):
            dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, **only(f"{wrong_outer}_over_rev")
            )
        with pytest.raises(dualgen.GradcheckError, match="in forward mode of sin"):
            dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, **only(f"{wrong_outer}_over_fwd")
            )


def test_gradgradcheck_with_given_grad_outputs():
    x = rand(2, 3)
    v = rand(2, 3, seed=5, requires_grad=False)
    assert dualgen.gradgradcheck(
        lambda x: x.sin() * x, (x,), (v,), check_fwd_over_rev=True
    )
    assert dualgen.gradgradcheck(
        lambda x: x.exp().t(), x, gen_non_contig_grad_outputs=True
    )
