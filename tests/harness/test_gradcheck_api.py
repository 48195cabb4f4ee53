"""The gradcheck harness's API: inputs that do not require grad, the batched
checks, sparse and single-precision inputs (the warning points at the caller), ops
without a backward or forward rule (NotImplementedError naming the op), and
`nondet_tol` for a nondeterministic backward.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from gradcheck_checks import F64, FAST, rand
from gradcheck_function_cases import NoisyBackward

import dualgen

torch.library.define("dgtest_gc::norule", "(Tensor x) -> Tensor")


@torch.library.impl("dgtest_gc::norule", "CompositeExplicitAutograd")
def _norule_impl(x):
    return x * 2


norule = torch.ops.dgtest_gc.norule.default


def test_no_input_requires_grad_raises_value_error():
    with pytest.raises(ValueError, match="requires_grad=True"):
        dualgen.gradcheck(torch.sin, (rand(3, requires_grad=False),))
    with pytest.raises(ValueError, match="requires_grad=True"):
        dualgen.adjoint_check(torch.sin, (torch.arange(3),))


def test_batched_checks_pass_a_right_function():
    """The batched checks themselves are compared with native's in
    test_native_conformance_gradcheck.py and test_batched_tangents.py."""
    x = rand(3)
    assert dualgen.gradcheck(
        torch.sin,
        (x,),
        check_forward_ad=True,
        check_batched_grad=True,
        check_batched_forward_grad=True,
    )
    assert dualgen.gradgradcheck(torch.sin, (x,), check_batched_grad=True)


def test_batched_checks_need_their_modes():
    with pytest.raises(AssertionError, match="requires check_forward_ad"):  # native's
        dualgen.gradcheck(torch.sin, (rand(3),), check_batched_forward_grad=True)


def test_sparse_input_is_not_implemented():
    x = torch.randn(3, dtype=F64).to_sparse().requires_grad_()
    with pytest.raises(NotImplementedError, match="strided"):
        dualgen.gradcheck(torch.sin, (x,))


def test_single_precision_input_warns_at_the_caller():
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(
        UserWarning, match="Input #0 .* not a double precision"
    ) as record:
        dualgen.gradcheck(torch.sin, (x,), raise_exception=False)
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dualgen.gradcheck(torch.sin, (rand(3),))  # no warning for float64


def zeta_inputs():
    return rand(3, requires_grad=False, positive=True) + 2, rand(3, positive=True)


RULE_MISSING = {
    "backward": r"backward \(VJP\) rule for {}",
    "forward": r"forward-mode \(JVP\) rule for {}",
}


@pytest.mark.parametrize("mode", RULE_MISSING)
@pytest.mark.parametrize(
    "func,inputs,op",
    [
        pytest.param(norule, lambda: (rand(3),), "dgtest_gc::norule", id="custom_op"),
        pytest.param(torch.special.zeta, zeta_inputs, "aten::special_zeta", id="zeta"),
    ],
)
def test_op_without_rule_raises_not_implemented(func, inputs, op, mode):
    options = {
        "check_backward_ad": mode == "backward",
        "check_forward_ad": mode == "forward",
    }
    with pytest.raises(NotImplementedError, match=RULE_MISSING[mode].format(op)):
        dualgen.gradcheck(func, inputs(), **options)


@pytest.mark.parametrize("fast", FAST)
def test_nondet_tol(fast):
    """NoisyBackward: a backward nondeterministic by 1e-9 relative."""
    x = rand(3)
    with pytest.raises(
        dualgen.GradcheckError,
        match=r"Backward is not reentrant, i\.e\., .*\n  in apply: ",
    ):
        dualgen.gradcheck(NoisyBackward.apply, (x,), fast_mode=fast)
    assert dualgen.gradcheck(NoisyBackward.apply, (x,), fast_mode=fast, nondet_tol=1e-6)
    assert dualgen.gradcheck(torch.sin, (x,), fast_mode=fast)  # the spec's: exact
