"""Custom torch.autograd.Functions that the gradcheck-through-Functions tests run
under dualgen.gradcheck and torch.autograd.gradcheck: correct ones (with a jvp, and
backward-only; test_native_messages.py derives its wrong ones from ExpJvp), a
nondeterministic one, the call counter, input makers, and `verdict` (a check's
outcome, comparable between the two). Everything is float64 / complex128, small and
seeded.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

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


class NoisyBackward(ExpJvp):
    """Right to 1e-9, but never twice the same: gradcheck's reentrancy check sees
    it. (A spec formula cannot draw random numbers: the sandbox refuses it, so the
    noise lives in a Function.)"""

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1 + 1e-9 * torch.rand_like(y))


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
