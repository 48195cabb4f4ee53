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


@pytest.mark.parametrize(
    "func,inputs,mode,match",
    [
        pytest.param(
            norule,
            lambda: (rand(3),),
            "backward",
            r"backward \(VJP\) rule for dgtest_gc::norule",
            id="custom_op_backward",
        ),
        pytest.param(
            norule,
            lambda: (rand(3),),
            "forward",
            r"forward-mode \(JVP\) rule for dgtest_gc::norule",
            id="custom_op_forward",
        ),
        pytest.param(
            torch.special.zeta,
            lambda: (
                rand(3, requires_grad=False, positive=True) + 2,
                rand(3, positive=True),
            ),
            "backward",
            r"backward \(VJP\) rule for aten::special_zeta",
            id="zeta_backward",
        ),
        pytest.param(
            torch.special.zeta,
            lambda: (
                rand(3, requires_grad=False, positive=True) + 2,
                rand(3, positive=True),
            ),
            "forward",
            r"forward-mode \(JVP\) rule for aten::special_zeta",
            id="zeta_forward",
        ),
    ],
)
def test_op_without_rule_raises_not_implemented(func, inputs, mode, match):
    options = {
        "check_backward_ad": mode == "backward",
        "check_forward_ad": mode == "forward",
    }
    with pytest.raises(NotImplementedError, match=match):
        dualgen.gradcheck(func, inputs(), **options)


class NoisySin(torch.autograd.Function):
    """A backward nondeterministic by 1e-9 relative. (A spec formula cannot draw
    random numbers: the sandbox refuses it, so the noise lives in a Function.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * (1 + 1e-9 * torch.rand_like(grad))


@pytest.mark.parametrize("fast", FAST)
def test_nondet_tol(fast):
    x = rand(3)
    with pytest.raises(
        dualgen.GradcheckError,
        match=r"Backward is not reentrant, i\.e\., .*\n  in apply: ",
    ):
        dualgen.gradcheck(NoisySin.apply, (x,), fast_mode=fast)
    assert dualgen.gradcheck(NoisySin.apply, (x,), fast_mode=fast, nondet_tol=1e-6)
    assert dualgen.gradcheck(torch.sin, (x,), fast_mode=fast)  # the spec's: exact
