"""Conformance with PyTorch's forward-AD tests: `gradcheck(check_forward_ad=True)`.

From the gradcheck tests of `TestAutograd` in pytorch/pytorch
`test/test_autograd.py`, in our own words: forward-mode verdicts for real and
complex inputs, how often `jvp` is called and with what, which modes run, the
batched checks, input validation (mkldnn, no input requiring grad, zero strides,
single precision), the error raised, outputs that change under perturbation.
Programs run `torch.autograd.gradcheck` and `dualgen.gradcheck` through
`conform`; see `tests/runtime/native_conformance_checks.py`.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import pytest
import torch
from autograd_functions import function
from forward_ad_checks import assert_same
from native_conformance_checks import (
    C128,
    F64,
    FAST,
    conform,
    forward_mismatch,
    level_active,
    no_level_left_behind,  # noqa: F401 - autouse
    outcomes,
    rand,
)
from torch.autograd import Function


def quiet(fn, *args, **kwargs):
    """fn(...) with warnings silenced (gradcheck on float32 inputs warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------
# 1. gradcheck(check_forward_ad=True)


def plus(x, y):
    return x + y, y


def plus_with_a_wrong_tangent(api):
    """`plus`, but y's tangent (when it has one) is scaled by 1.1."""

    def fn(x, y):
        primal, tangent = api.fwAD.unpack_dual(y)
        if tangent is not None:
            y = api.fwAD.make_dual(primal, tangent * 1.1)
        return x + y, y

    return fn


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtypes", [(F64, F64), (C128, F64), (C128, C128)])
@pytest.mark.parametrize("wrong", [False, True])
def test_gradcheck_forward_mode_verdict(wrong, dtypes, fast):
    def program(api):
        x = torch.rand(2, dtype=dtypes[0], requires_grad=True)
        y = torch.rand(2, dtype=dtypes[1], requires_grad=True)
        fn = plus_with_a_wrong_tangent(api) if wrong else plus
        return api.gradcheck(fn, (x, y), check_forward_ad=True, fast_mode=fast)

    if wrong:
        conform(program, error=RuntimeError, match=forward_mismatch(1))
    else:
        assert conform(program) is True


@pytest.mark.parametrize("fast", FAST)
def test_gradcheck_forward_mode_of_view_as_real_of_a_resolved_conj(fast):
    def program(api):
        x = torch.rand(2, dtype=F64, requires_grad=True)
        return api.gradcheck(
            lambda x: torch.view_as_real(torch.resolve_conj(x * 1j)),
            x,
            check_forward_ad=True,
            fast_mode=fast,
        )

    assert conform(program) is True


def _recording_function():
    class Record(Function):
        calls = 0
        grad_flags: ClassVar[list] = []

        @staticmethod
        def forward(ctx, x, y):
            if Record.level_active():
                Record.grad_flags.append((x.requires_grad, y.requires_grad))
            return x.clone(), y.clone()

        @staticmethod
        def jvp(ctx, x_t, y_t):
            Record.calls += 1
            return x_t, y_t

    return Record


JVP_COUNT_CASES = [
    pytest.param(True, False, False, id="no_undefined_check"),
    pytest.param(True, True, False, id="undefined_check"),
    pytest.param(False, True, False, id="y_no_grad"),
    pytest.param(True, True, True, id="batched"),
    pytest.param(False, True, True, id="batched_y_no_grad"),
]


@pytest.mark.parametrize("y_grad, undefined, batched", JVP_COUNT_CASES)
def test_gradcheck_forward_mode_calls_jvp_as_often_and_without_requires_grad(
    y_grad, undefined, batched
):
    """gradcheck passes its inputs to the function inside the level without
    requires_grad, and calls jvp once per differentiable input (numel 1), plus the
    calls of the undefined-tangent check, plus more for the batched checks.

    The undefined-tangent check runs, for each differentiable input, once with a
    zero tangent on it and once with none (jvp is not called then when no input
    has a tangent: one call when a single input is differentiable), both."""

    def program(api):
        Record = _recording_function()
        Record.level_active = staticmethod(lambda: level_active(api))
        x = torch.rand(1, dtype=F64, requires_grad=True)
        y = torch.rand(1, dtype=F64, requires_grad=y_grad)
        checked = api.gradcheck(
            Record.apply,
            (x, y),
            check_forward_ad=True,
            check_undefined_grad=undefined,
            check_backward_ad=False,
            check_batched_grad=False,
            check_batched_forward_grad=batched,
        )
        return checked, set(Record.grad_flags), Record.calls

    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert native_ok, native
    if not dual_ok:
        raise dual
    assert_same(dual[:2], native[:2], "verdict and requires_grad inside the level")
    assert native[1] == {(False, False)}
    differentiable = 1 + y_grad
    # The batched check: per input, two jvps in a loop and one under vmap.
    batched_calls = 3 * differentiable if batched else 0
    undefined_calls = 0
    if undefined:
        undefined_calls = 1 if differentiable == 1 else 2 * differentiable
    assert dual[2] == native[2] == differentiable + undefined_calls + batched_calls


@pytest.mark.parametrize("fwd_bad", [False, True])
@pytest.mark.parametrize("bwd_bad", [False, True])
@pytest.mark.parametrize(
    "forward, backward",
    [
        (1, 1),
        (1, 0),
        (0, 1),
        (0, 0),
    ],
)
def test_gradcheck_runs_only_the_modes_asked_for(forward, backward, fwd_bad, bwd_bad):
    """PyTorch's test also sets check_batched_grad=check_backward_ad: so does
    this one."""

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, fwd_bad, bwd_bad):
            ctx.fwd_bad, ctx.bwd_bad = fwd_bad, bwd_bad
            return x * 2

        @staticmethod
        def vjp(ctx, grad):
            if ctx.bwd_bad:
                raise RuntimeError("FAIL BWD")
            return 2 * grad, None, None

        @staticmethod
        def jvp(ctx, x_t, _1, _2):
            if ctx.fwd_bad:
                raise RuntimeError("FAIL FWD")
            return 2 * x_t

    def program(api, fast):
        x = torch.rand(2, dtype=F64, requires_grad=True)
        return api.gradcheck(
            Scale.apply,
            (x, fwd_bad, bwd_bad),
            check_forward_ad=bool(forward),
            check_backward_ad=bool(backward),
            check_undefined_grad=bool(backward),
            check_batched_grad=bool(backward),
            fast_mode=fast,
        )

    for fast in (False, True):

        def run(api, fast=fast):
            return program(api, fast)

        if not forward and not backward:
            conform(run, error=AssertionError, match="Expected at least one of")
        elif backward and bwd_bad:  # a backward failure hides a forward one
            conform(run, error=RuntimeError, match="FAIL BWD")
        elif forward and fwd_bad:
            conform(run, error=RuntimeError, match="FAIL FWD")
        else:
            assert conform(run) is True


def _random_in_jvp():
    def jvp(ctx, x_t):
        torch.randn_like(x_t)
        return x_t * 2

    return function(
        "Twice", lambda ctx, x: x * 2, vjp=lambda ctx, grad: grad * 2, jvp=jvp
    ).apply


BATCHED_FORWARD_CASES = {
    "non_tensor_input": (lambda a, b: (a.clone(), a + 1), lambda x: (x, 1), None),
    "unused_input": (lambda a, c: a.clone(), lambda x: (x, x.clone()), None),
    "random_in_jvp": (
        _random_in_jvp(),
        lambda x: (x,),
        "vmap: We do not yet support calling random operations inside of vmap",
    ),
}


@pytest.mark.parametrize("case", BATCHED_FORWARD_CASES)
def test_gradcheck_batched_forward_grad(case):
    fn, make_inputs, error = BATCHED_FORWARD_CASES[case]

    def program(api):
        x = torch.rand(2, dtype=F64, requires_grad=True)
        return api.gradcheck(
            fn,
            make_inputs(x),
            check_forward_ad=True,
            check_backward_ad=error is not None,
            check_batched_grad=False,
            check_undefined_grad=False,
            check_batched_forward_grad=True,
        )

    if error is None:
        assert conform(program) is True
    else:
        conform(program, error=RuntimeError, match=error)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no MKL-DNN")
@pytest.mark.parametrize("fast", FAST)
def test_gradcheck_forward_mode_refuses_mkldnn_inputs(fast):
    def program(api):
        x = torch.ones(1).to_mkldnn().requires_grad_()
        return quiet(
            api.gradcheck,
            lambda x: x.to_dense(),
            (x,),
            raise_exception=False,
            fast_mode=fast,
            check_forward_ad=True,
            atol=1e-1,
            rtol=1e-1,
        )

    conform(
        program,
        error=ValueError,
        match="MKLDNN inputs are not support(ed)? for forward AD gradcheck",
    )


# name: (the input, made inside the program; the error native raises, its phrase)
REFUSED_INPUTS = {
    "none_requires_grad": (
        lambda: rand(10),
        ValueError,
        "at least one input tensor to require gradient",
    ),
    "a_zero_stride": (
        lambda: torch.ones(1, dtype=F64, requires_grad=True).expand((2, 2)),
        RuntimeError,
        "The 0th input has a dimension with stride 0",
    ),
}


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("case", REFUSED_INPUTS)
def test_gradcheck_refuses_an_input(case, fast):
    make, error, match = REFUSED_INPUTS[case]

    def program(api):
        return api.gradcheck(
            lambda x: x,
            (make(),),
            raise_exception=False,
            fast_mode=fast,
            check_forward_ad=True,
        )

    conform(program, error=error, match=match)


@pytest.mark.parametrize("fast", FAST)
def test_gradcheck_warns_about_single_precision_inputs(fast):
    def program(api):
        x = torch.ones(1, dtype=torch.float32, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            checked = api.gradcheck(
                lambda x: x, (x,), atol=1e-1, fast_mode=fast, check_forward_ad=True
            )
        return checked, any(
            "Input #0 requires gradient and is not a double precision" in str(w.message)
            and issubclass(w.category, UserWarning)
            for w in caught
        )

    assert conform(program) == (True, True)


@pytest.mark.parametrize("fast", FAST)
def test_gradcheck_forward_failure_is_a_gradcheck_error_or_false(fast):
    """A forward-mode mismatch raises GradcheckError (a RuntimeError), or gives
    False with raise_exception=False; other errors of the function propagate."""

    def program(api):
        x = torch.rand(2, dtype=F64, requires_grad=True)
        y = torch.rand(2, dtype=F64, requires_grad=True)
        wrong = plus_with_a_wrong_tangent(api)
        options = {"check_forward_ad": True, "check_backward_ad": False}
        verdict = api.gradcheck(
            wrong, (x, y), raise_exception=False, fast_mode=fast, **options
        )
        try:
            api.gradcheck(wrong, (x, y), fast_mode=fast, **options)
        except RuntimeError as exc:
            raised = type(exc).__name__
        try:

            def broken(x):
                raise RuntimeError("Not a GradcheckError!")

            api.gradcheck(broken, (x,), raise_exception=False, **options)
        except RuntimeError as exc:
            propagated = str(exc)
        return verdict, raised, propagated

    assert conform(program) == (False, "GradcheckError", "Not a GradcheckError!")


def test_gradcheck_forward_mode_with_complex_and_real_outputs():
    def program(api):
        a = torch.ones(2, 2, dtype=F64, requires_grad=True)
        b = torch.ones(2, 2, dtype=F64, requires_grad=True)
        c = torch.ones(2, 2, dtype=C128, requires_grad=True)
        return (
            api.gradcheck(
                lambda x, y: (torch.complex(x, y), x + 1),
                (a, b),
                check_forward_ad=True,
            ),
            api.gradcheck(lambda z: (z, torch.real(z)), (c,), check_forward_ad=True),
        )

    assert conform(program) == (True, True)


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("what", ["shape", "dtype"])
def test_gradcheck_forward_mode_outputs_must_not_change_with_perturbation(what, fast):
    def fn(x):
        if torch.all(x >= 1):
            return torch.cat([x, x]) if what == "shape" else x.to(torch.float32)
        return x

    def program(api):
        a = torch.ones(1, dtype=F64, requires_grad=True)
        return api.gradcheck(
            fn, (a,), check_forward_ad=True, check_backward_ad=False, fast_mode=fast
        )

    conform(
        program,
        error=AssertionError,
        match=f"return outputs with the same {what} when inputs are perturbed",
    )
