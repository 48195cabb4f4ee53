"""Custom autograd.Functions without a dual level, and dualgen's patch on
Function.apply: inputs without tangents give no tangent (forward is not
differentiated), no level is plain torch, `Function.apply` bound before a level
still uses the jvp; the patch is installed only while a level is active (in any
thread), and the ctx hooks it leaves are inert without a level.
"""

from __future__ import annotations

import threading

import pytest
import torch
from custom_function_checks import (
    CTX_HOOKS,
    DTYPE,
    STE,
    assert_unpatched,
    clean_state,  # noqa: F401 - autouse
    jvp_of,
    patched,
    randn,
    run_both,
)
from torch.autograd.function import BackwardCFunction, Function
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# no tangents, no level, the patch


def test_inputs_without_tangents_give_no_tangent_and_forward_is_not_differentiated():
    weight, tw = randn(3), randn(3)

    class UsesClosure(Function):
        @staticmethod
        def forward(ctx, x):
            return x * captured[0]

        @staticmethod
        def jvp(ctx, t):
            return t * 100

    captured = []

    def program(fwAD):
        with fwAD.dual_level():
            captured[:] = [fwAD.make_dual(weight.clone(), tw.clone())]
            plain = UsesClosure.apply(randn(3))
            dual = UsesClosure.apply(
                fwAD.make_dual(randn(3), torch.ones(3, dtype=DTYPE))
            )
            return fwAD.unpack_dual(plain), fwAD.unpack_dual(dual)

    (_, no_tangent), (_, tangent) = run_both(program)
    assert no_tangent is None
    assert_close(tangent, torch.full((3,), 100.0, dtype=DTYPE))  # the closure's unseen


def test_function_without_level_is_plain_torch():
    x = randn(4, requires_grad=True)
    out = STE.apply(x * 3)
    assert type(out.grad_fn).__name__ == "STEBackward"
    out.sum().backward()
    assert_close(x.grad, torch.full((4,), 3.0, dtype=DTYPE))
    assert_unpatched()


ste = STE.apply  # bound before any level is entered, as libraries do


def test_apply_bound_before_the_level_uses_the_jvp():
    x, t = randn(5) * 3, randn(5)
    _, tangent = run_both(jvp_of(ste, (x, t)))
    assert_close(tangent, t)


# --------------------------------------------------------------------------------------
# the patch on Function.apply


def test_apply_is_patched_only_while_a_level_is_active():
    assert_unpatched()
    with dual_fwAD.dual_level():
        assert patched()
        with dual_fwAD.dual_level():
            pass
        assert patched()
    assert_unpatched()
    with pytest.raises(ValueError), dual_fwAD.dual_level():
        raise ValueError
    assert_unpatched()


class DoubleMarked(Function):
    """Saves, marks and materializes: touches every hooked ctx field."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(y)
        x.mul_(2)
        ctx.mark_dirty(x)
        n = y.argmax()
        ctx.mark_non_differentiable(n)
        return x, n

    @staticmethod
    def backward(ctx, g, _):
        (y,) = ctx.saved_tensors
        return 2 * g * torch.ones_like(y), None


def test_ctx_hooks_are_inert_without_a_level():
    """The ctx class is hooked for good after the first level: with no level,
    Functions save, mark and differentiate as in plain torch."""
    with dual_fwAD.dual_level():
        pass
    assert all(name in BackwardCFunction.__dict__ for name in CTX_HOOKS)
    x = randn(3, requires_grad=True)
    out, n = DoubleMarked.apply(x.clone(), randn(3))
    assert not n.requires_grad
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert_close(grad, torch.full_like(x, 2.0))
    assert "_dualgen_record" not in out.grad_fn.__dict__


def test_patch_stays_while_another_thread_has_a_level():
    """The patch is process-wide: it stays until every thread's levels are gone,
    and a thread without level runs Functions as plain torch."""
    entered, go_on, tangents = threading.Event(), threading.Event(), []
    x, t = randn(3) * 3, randn(3)

    def worker():
        with dual_fwAD.dual_level():
            entered.set()
            go_on.wait()
            tangents.append(dual_fwAD.unpack_dual(STE.apply(dual_fwAD.make_dual(x, t))))

    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait()
    with dual_fwAD.dual_level():
        pass
    assert patched()
    out = STE.apply(randn(3, requires_grad=True))  # this thread has no level
    assert type(out.grad_fn).__name__ == "STEBackward"
    go_on.set()
    thread.join()
    assert_close(tangents[0].tangent, t)
    assert_unpatched()
