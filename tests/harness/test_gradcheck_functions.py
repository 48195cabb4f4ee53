"""dualgen.gradcheck through custom torch.autograd.Functions, against torch's.

gradcheck checks what the user wrote: backward mode runs the Function's
`backward` (or `vjp`) from dualgen's tape, forward mode its `jvp`. So correct
Functions pass exactly where torch.autograd.gradcheck passes, wrong ones fail
with the same verdict and the same key phrases, and `jvp` and `backward` are
called as many times as torch calls them. Everything is float64 / complex128,
small and seeded.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import _SingleLevelFunction, once_differentiable
from torch.utils.checkpoint import checkpoint

import dualgen

F64, C128 = torch.float64, torch.complex128
DTYPES = [pytest.param(F64, id="real"), pytest.param(C128, id="complex")]
FAST = [pytest.param(False, id="slow"), pytest.param(True, id="fast")]
TorchGradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError
CALLS: Counter = Counter()  # calls of the Functions' jvp and backward


@pytest.fixture(autouse=True)
def _fresh_counts_and_no_warnings():
    CALLS.clear()
    with warnings.catch_warnings():
        # torch warns that check_undefined_grad may break existing callers.
        warnings.simplefilter("ignore", UserWarning)
        yield


def rand(*shape, dtype=F64, seed=0, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=F64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=F64))
    return x.to(dtype).requires_grad_(requires_grad)


def counted(kind: str):
    """A staticmethod that counts its calls in CALLS[kind]."""

    def decorate(fn):
        def wrapper(*args):
            CALLS[kind] += 1
            return fn(*args)

        return staticmethod(wrapper)

    return decorate


# --------------------------------------------------------------------------------------
# Functions (complex ones follow autograd's conjugate convention in backward)


class Exp(Function):
    """backward only (forward mode: see test_forward_mode_derives_...)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        ctx.save_for_forward(y)
        return y

    @counted("backward")
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y.conj()


class ExpJvp(Exp):
    @counted("jvp")
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y


class SinVjp(Function):
    """setup_context style, `vjp` instead of `backward`."""

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @counted("backward")
    def vjp(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos().conj()

    @counted("jvp")
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * x.cos()


class Scale(Function):
    """A non-tensor argument with a default; backward reads needs_input_grad."""

    @staticmethod
    def forward(x, y, alpha=2.0):
        return alpha * x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, ctx.alpha = inputs
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)

    @counted("backward")
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * ctx.alpha * y.conj() if ctx.needs_input_grad[0] else None
        gy = g * ctx.alpha * x.conj() if ctx.needs_input_grad[1] else None
        return gx, gy, None

    @counted("jvp")
    def jvp(ctx, tx, ty, _):
        x, y = ctx.saved_tensors
        return ctx.alpha * (tx * y + x * ty)


class MulInplace(Function):
    """x *= y, mark_dirty; saves a copy made in forward (so no second derivative
    in x: gradgradcheck fails, natively too)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x.clone(), y)
        ctx.save_for_forward(x.clone(), y)
        ctx.mark_dirty(x.mul_(y))
        return x

    @counted("backward")
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y.conj(), g * x.conj()

    @counted("jvp")
    def jvp(ctx, tx, ty):
        x, y = ctx.saved_tensors
        return tx.mul_(y).add_(x * ty)


class SinCos(Function):
    """Two outputs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x.sin(), x.cos()

    @counted("backward")
    def backward(ctx, gs, gc):
        (x,) = ctx.saved_tensors
        return gs * x.cos().conj() - gc * x.sin().conj()

    @counted("jvp")
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * x.cos(), -t * x.sin()


class Sort(Function):
    """Non-differentiable outputs: integer indices, and a float marked so."""

    @staticmethod
    def forward(ctx, x):
        y, i = x.sort()
        positive = (y > 0).to(x.dtype)
        ctx.mark_non_differentiable(i, positive)
        ctx.save_for_backward(i)
        ctx.save_for_forward(i)
        return y, i, positive

    @counted("backward")
    def backward(ctx, g, _, __):
        (i,) = ctx.saved_tensors
        return torch.zeros_like(g).scatter(-1, i, g)

    @counted("jvp")
    def jvp(ctx, t):
        (i,) = ctx.saved_tensors
        return t.gather(-1, i), None, None


class NoMaterialize(Function):
    """set_materialize_grads(False): backward gets None for an unused output, and
    only None where the gradients are undefined (check_undefined_grad)."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @counted("backward")
    def backward(ctx, g2, g3):
        if g2 is None and g3 is None:
            return None
        return (0 if g2 is None else 2 * g2) + (0 if g3 is None else 3 * g3)


class Transpose(Function):
    """Returns a view of its input; jvp the same view of the tangent."""

    @staticmethod
    def forward(ctx, x):
        return x.t()

    @counted("backward")
    def backward(ctx, g):
        return g.t()

    @counted("jvp")
    def jvp(ctx, t):
        return t.t()


class BroadcastAdd(Function):
    """backward gives b a gradient of x's shape: the engine sums it to b's."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @counted("backward")
    def backward(ctx, g):
        return g, g

    @counted("jvp")
    def jvp(ctx, tx, tb):
        return tx + tb


class OnceDifferentiable(ExpJvp):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        CALLS["backward"] += 1
        (y,) = ctx.saved_tensors
        return g * y.conj()


class AbsSquared(Function):
    """Complex in, real out."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        ctx.save_for_forward(z)
        return (z * z.conj()).real.clone()

    @counted("backward")
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z

    @counted("jvp")
    def jvp(ctx, t):
        (z,) = ctx.saved_tensors
        return 2 * (t * z.conj()).real


class CallsExp(Function):
    """backward applies another Function."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @counted("backward")
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Exp.apply(x).conj()


class GatedSave(Function):
    """Saves only what needs_input_grad (read in forward) says backward needs."""

    @staticmethod
    def forward(ctx, x, y):
        need_x, need_y = ctx.needs_input_grad
        ctx.save_for_backward(y if need_x else None, x if need_y else None)
        ctx.save_for_forward(x, y)
        return x * y

    @counted("backward")
    def backward(ctx, g):
        y, x = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        return g * y.conj() if need_x else None, g * x.conj() if need_y else None

    @counted("jvp")
    def jvp(ctx, tx, ty):
        x, y = ctx.saved_tensors
        return tx * y + x * ty


def two(dtype):
    return rand(3, dtype=dtype), rand(3, dtype=dtype, seed=1)


def mul_inplace_on_a_view(x, y):
    base = x.clone()
    MulInplace.apply(base[:2], y[:2])
    return base


# name: (function, inputs(dtype)); every Function here has a jvp.
CORRECT = {
    "jvp": (ExpJvp.apply, lambda d: (rand(3, dtype=d),)),
    "vjp_setup_context": (SinVjp.apply, lambda d: (rand(2, 2, dtype=d),)),
    "default_argument": (Scale.apply, two),
    "argument_given": (lambda x, y: Scale.apply(x, y, 0.5), two),
    "same_input_twice": (lambda x: Scale.apply(x, x), lambda d: (rand(3, dtype=d),)),
    "mark_dirty": (lambda x, y: MulInplace.apply(x.clone(), y), two),
    "mark_dirty_then_used": (
        lambda x, y: MulInplace.apply(x.clone(), y).sin() + x,
        two,
    ),
    "mark_dirty_on_a_view": (mul_inplace_on_a_view, two),
    "two_outputs": (SinCos.apply, lambda d: (rand(3, dtype=d),)),
    "one_of_two_outputs": (
        lambda x: SinCos.apply(x)[1],
        lambda d: (rand(3, dtype=d),),
    ),
    "non_differentiable_outputs": (Sort.apply, lambda d: (rand(4),)),
    "view_output": (Transpose.apply, lambda d: (rand(2, 3, dtype=d),)),
    "broadcast_gradient": (
        BroadcastAdd.apply,
        lambda d: (rand(2, 3, dtype=d), rand(3, dtype=d, seed=1)),
    ),
    "once_differentiable": (OnceDifferentiable.apply, lambda d: (rand(3, dtype=d),)),
    "complex_to_real": (AbsSquared.apply, lambda d: (rand(3, dtype=C128),)),
    "inside_a_composition": (
        lambda x: ExpJvp.apply(x.sin() * 2).cos(),
        lambda d: (rand(3, dtype=d),),
    ),
    "input_is_a_view": (lambda x: ExpJvp.apply(x[1:]), lambda d: (rand(3, dtype=d),)),
    "output_written_in_place": (
        lambda x: SinVjp.apply(x).mul_(2),
        lambda d: (rand(3, dtype=d),),
    ),
    "needs_input_grad_x": (
        GatedSave.apply,
        lambda d: (rand(3, dtype=d), rand(3, dtype=d, seed=1, requires_grad=False)),
    ),
    "needs_input_grad_y": (
        GatedSave.apply,
        lambda d: (rand(3, dtype=d, requires_grad=False), rand(3, dtype=d, seed=1)),
    ),
}

# Without jvp: torch's forward mode raises, so backward mode only.
BACKWARD_ONLY = {
    "backward_only": (Exp.apply, lambda d: (rand(3, dtype=d),)),
    "no_materialize": (
        lambda x: NoMaterialize.apply(x)[1],
        lambda d: (rand(3, dtype=d),),
    ),
    "no_materialize_both": (NoMaterialize.apply, lambda d: (rand(3, dtype=d),)),
    "backward_applies_a_function": (CallsExp.apply, lambda d: (rand(3, dtype=d),)),
}

BOTH = {"check_forward_ad": True, "check_backward_ad": True}


# --------------------------------------------------------------------------------------
# 1. correct Functions pass, as in torch


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_functions_pass_like_torch(name, dtype, fast):
    func, make = CORRECT[name]
    inputs = make(dtype)
    assert torch.autograd.gradcheck(func, inputs, fast_mode=fast, **BOTH) is True
    assert dualgen.gradcheck(func, inputs, fast_mode=fast, **BOTH) is True


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(BACKWARD_ONLY))
def test_functions_without_jvp_pass_backward_mode_like_torch(name, dtype, fast):
    func, make = BACKWARD_ONLY[name]
    inputs = make(dtype)
    assert torch.autograd.gradcheck(func, inputs, fast_mode=fast) is True
    assert dualgen.gradcheck(func, inputs, fast_mode=fast) is True


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


def test_apply_is_unhooked_after_gradcheck():
    assert dualgen.gradcheck(ExpJvp.apply, (rand(3),), **BOTH)
    with pytest.raises(TorchGradcheckError):
        dualgen.gradcheck(WrongBackward.apply, (rand(3),))
    assert "apply" not in _SingleLevelFunction.__dict__


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
MODES = {
    "bwd": {"check_forward_ad": False, "check_backward_ad": True},
    "fwd": {"check_forward_ad": True, "check_backward_ad": False},
    "both": BOTH,
}


def verdict(check, func, inputs, **options):
    """True, False, or the exception it raised."""
    try:
        return check(func, inputs, raise_exception=False, **options)
    except Exception as error:  # noqa: BLE001 (compared between the two)
        return f"{type(error).__name__}: {error}"


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
