"""Shared by the test_custom_function_*.py modules: custom torch.autograd.Functions
run once under `torch.autograd.forward_ad` and once under `dualgen.forward_ad`
(each program takes the API module as `fwAD`) and compared: primals, tangent
presence, tangent values and dtypes, what the user's jvp receives. The Functions
used by several modules; the autouse fixture `clean_state` (each module imports
it) checks that no level, mode or patch on Function.apply is left behind.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from autograd_functions import function
from forward_ad_checks import assert_same, jvp_of, unpack_all  # noqa: F401 - shared
from forward_ad_checks import run_both as run_both_returning_both
from leaks import release_levels
from torch.autograd.function import Function, _SingleLevelFunction

import dualgen.forward_ad as dual_fwAD
from dualgen.functions import hooks

DTYPE = torch.float64
# torch's Function.apply: Python up to torch 2.13, where dualgen hooks
# `_SingleLevelFunction.apply` while levels are active; C++ after, where dualgen's
# hook replaces `Function.apply` from import on (runtime/functions/hooks.py).
ORIGINAL_APPLY = hooks._NATIVE_FUNCTION_APPLY
CTX_HOOKS = ("__init__", "to_save", "saved_for_forward", "dirty_tensors")
CTX_HOOKS += ("non_differentiable", "materialize_grads")


def patched() -> bool:
    """dualgen's hook on Function.apply (installed while a level is active):
    on `_SingleLevelFunction` where torch's `Function.apply` is Python, on
    `Function` itself where it is C++ (runtime/functions/hooks.py)."""
    if hooks._APPLY_IS_PYTHON:
        return "apply" in _SingleLevelFunction.__dict__
    return bool(hooks._USERS["levels"] or hooks._USERS["tapes"])


# --------------------------------------------------------------------------------------
# helpers


def randn(*shape, dtype=DTYPE, requires_grad=False):
    return torch.randn(*shape, dtype=dtype, requires_grad=requires_grad)


def run_both(program, seed=0):
    """program(fwAD) under native forward AD and under dualgen, compared;
    dualgen's result."""
    return run_both_returning_both(program, seed)[0]


def raises_both(program, error, match):
    """program(fwAD) raises `error` matching `match` under both engines."""
    for fwAD in (native_fwAD, dual_fwAD):
        torch.manual_seed(0)
        with pytest.raises(error, match=match):
            program(fwAD)


def seen(tangents):
    """What a jvp received, comparable across engines."""
    return [
        None if t is None else (tuple(t.shape), t.dtype, t.clone()) for t in tangents
    ]


@pytest.fixture(autouse=True)
def clean_state():
    """No level, mode or patch is left behind by a test."""
    yield
    leaked = release_levels()
    assert not leaked, f"left behind: {leaked}"
    assert_unpatched()


def assert_unpatched():
    """Function.apply is torch's again. (The ctx class's hooks stay once
    installed, inert without a level: `test_ctx_hooks_are_inert_without_a_level`.)"""
    if hooks._APPLY_IS_PYTHON:
        assert Function.__dict__["apply"] is ORIGINAL_APPLY
    assert not patched()


# --------------------------------------------------------------------------------------
# Functions


class STE(Function):
    """Straight-through estimator: round forward, identity derivative."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        return t


RECEIVED = []  # what the jvps below were given


class CtxMul(Function):
    """x * y * scale + shift, forward(ctx, ...) style."""

    @staticmethod
    def forward(ctx, x, y, scale=2.0, shift=None):
        ctx.save_for_forward(x, y)
        ctx.scale = scale
        out = x * y * scale
        return out if shift is None else out + shift

    @staticmethod
    def jvp(ctx, xt, yt, *more):  # one tangent per argument given, as native
        RECEIVED.append(seen([xt, yt, *more]))
        x, y = ctx.saved_tensors
        out = (xt * y + x * yt) * ctx.scale
        return out if len(more) < 2 or more[1] is None else out + more[1]


class SetupMul(Function):
    """The same with forward(...) + setup_context."""

    @staticmethod
    def forward(x, y, scale=2.0, shift=None):
        out = x * y * scale
        return out if shift is None else out + shift

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, scale, _ = inputs
        ctx.save_for_forward(x, y)
        ctx.scale = scale

    @staticmethod
    def jvp(ctx, xt, yt, scale_t, shift_t):
        RECEIVED.append(seen([xt, yt, scale_t, shift_t]))
        x, y = ctx.saved_tensors
        out = (xt * y + x * yt) * ctx.scale
        return out if shift_t is None else out + shift_t


class SinCos(Function):
    """Several outputs, some not tensors, an integer one."""

    @staticmethod
    def forward(ctx, x, label):
        ctx.save_for_forward(x)
        return x.sin(), label, x.cos(), x.argmax(), 7

    @staticmethod
    def jvp(ctx, t, _):
        (x,) = ctx.saved_tensors
        return t * x.cos(), None, -t * x.sin(), None, None


class SortNonDiff(Function):
    """Sorted values and their (float) positions, marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        values, index = x.sort()
        ctx.save_for_forward(index)
        positions = index.to(x.dtype)
        ctx.mark_non_differentiable(positions)
        return values, positions

    @staticmethod
    def jvp(ctx, t):
        (index,) = ctx.saved_tensors
        return t.gather(-1, index), None


class MulInPlace(Function):
    """x *= y (mark_dirty); jvp updates x's tangent in place."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.mark_dirty(x)
        ctx.save_for_forward(x.clone(), y)
        return x.mul_(y)

    @staticmethod
    def jvp(ctx, xt, yt):
        x, y = ctx.saved_tensors
        return xt.mul_(y).add_(x * yt)


def function_with(forward, jvp, dirty=None, name="F"):
    """A Function of one input; dirty(x, out) is what it gives mark_dirty."""

    def forward_(ctx, x):
        out = forward(x)
        if dirty is not None:
            ctx.mark_dirty(dirty(x, out))
        return out

    def jvp_(ctx, t):
        return jvp(t)

    methods = {"forward": staticmethod(forward_), "jvp": staticmethod(jvp_)}
    return type(name, (Function,), methods)


# Views of the input; jvps return the same views of the tangent.
Diagonal = function_with(torch.diagonal, torch.diagonal, name="Diagonal")
Identity = function_with(lambda x: x, lambda t: t.view_as(t), name="Identity")


class GradReverse(Function):
    """Identity forward (a view), gradient times -alpha backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None

    @staticmethod
    def jvp(ctx, t, _):
        return t.view_as(t)


# --------------------------------------------------------------------------------------
# Functions with jvp and backward (the derived-jvp tests take the jvp away)


def times_cos_of_saved(ctx, t):
    """sin's jvp and backward: t * cos(x), x the one tensor saved."""
    (x,) = ctx.saved_tensors
    return t * x.cos()


def _save_the_input(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_forward(x)
    ctx.save_for_backward(x)


MySin = function(
    "MySin",
    lambda x: x.sin(),
    setup_context=_save_the_input,
    jvp=times_cos_of_saved,
    backward=times_cos_of_saved,
    doc="sin with setup_context, save_for_forward and save_for_backward.",
)


def without_jvp(cls: type) -> type:
    """cls with the jvp taken away (native then refuses it)."""
    return type(f"{cls.__name__}NoJvp", (cls,), {"jvp": staticmethod(Function.jvp)})


class MulExp(Function):
    """(x * y, exp(x)); backward reads needs_input_grad and saved tensors."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_forward(x, y)
        ctx.save_for_backward(x, y)
        return x * y, x.exp()

    @staticmethod
    def jvp(ctx, xt, yt):
        x, y = ctx.saved_tensors
        return xt * y + x * yt, xt * x.exp()

    @staticmethod
    def backward(ctx, g_prod, g_exp):
        x, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = g_prod * y.conj() + g_exp * x.exp().conj()
        if ctx.needs_input_grad[1]:
            gy = g_prod * x.conj()
        return gx, gy


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def jvp(ctx, t):
        return t.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class FirstRow(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x[0]

    @staticmethod
    def jvp(ctx, t):
        return t[0]

    @staticmethod
    def backward(ctx, g):
        grad = g.new_zeros(ctx.shape)
        grad[0] = g
        return grad


def _native_apply_takes_keywords() -> bool:
    """Whether the installed torch's Function.apply passes keyword arguments on
    (torch 2.12's raises "apply() takes no keyword arguments"): found by trying."""
    try:
        CtxMul.apply(torch.zeros(1), y=torch.zeros(1))
    except TypeError:
        return False
    return True


NATIVE_APPLY_TAKES_KEYWORDS = _native_apply_takes_keywords()
skip_without_keywords = pytest.mark.skipif(
    not NATIVE_APPLY_TAKES_KEYWORDS,
    reason=f"torch {torch.__version__}'s Function.apply takes no keyword arguments",
)
