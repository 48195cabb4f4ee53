"""A level holds nothing its values don't need: a loop of 10,000 dual ops inside
one level keeps its tangents, its bookkeeping and the saved-output entries of
forward-over-reverse steps in proportion to what is alive, not to how many ops
ran. Checked by weak references to the tangents of values the loop has left
behind, by the level's own tables, and by resident memory with 256 KiB values
(a leak of one per step would be 2.5 GiB)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import dualgen.forward_ad as fwAD
from dualgen.levels import STATE

STEPS = 10_000


def resident_mib() -> float:
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def test_a_long_loop_in_one_level_stays_flat():
    x = torch.randn(256, 256)  # 256 KiB in float32
    tangents: list[weakref.ref] = []
    with fwAD.dual_level():
        level = STATE.levels[-1]
        y = fwAD.make_dual(x, torch.randn_like(x))
        for step in range(STEPS):
            # element-wise ops, views, an in-place update and a reduction
            y = (y * 0.999).sin().t().t()
            y.add_(0.001)
            if step % 100 == 0:
                y = y - y.mean()
                tangents.append(weakref.ref(fwAD.unpack_dual(y).tangent))
            if step == 1_000:
                gc.collect()
                early = resident_mib()
        gc.collect()
        late = resident_mib()
        alive = sum(ref() is not None for ref in tangents)
        assert alive <= 1, f"{alive} tangents of values the loop left behind live on"
        assert len(level.tensors) < 4_096, len(level.tensors)
        assert late - early < 100, f"resident memory grew {late - early:.0f} MiB"
        assert fwAD.unpack_dual(y).tangent is not None


@pytest.mark.parametrize("rows", [32, 512], ids=["small", "large"])
def test_forward_gradient_steps_leave_no_saved_outputs(backend, rows):
    """A forward-gradient training loop with parameters that require grad: each
    step records a graph whose ops save their outputs (tanh, exp), and the
    tangents carry graphs of their own that read those outputs. The level's
    saved-output entries go with each step's memory (saved_tangents.py), and a
    step that takes a gradient (forward over reverse) still finds them.

    With the C++ kernels, ops taken in front of autograd would compute a tangent
    from the output the user gets, whose node holds the tangent for its
    backward: a cycle through autograd's C++ graph that Python's collector
    cannot see (native forward AD has it, and frees it when the level ends).
    There the formula reads a second run of the op where its operands are small,
    and larger ones go to the mode (hot_path/policy.py, `front_when_recorded`)."""
    w = torch.randn(64, 64, requires_grad=True)
    x = torch.randn(rows, 64)
    with fwAD.dual_level():
        level = STATE.levels[-1]
        for step in range(2_000):
            dual_w = fwAD.make_dual(w, torch.randn_like(w))
            loss = torch.tanh(x @ dual_w).exp().sum()
            assert fwAD.unpack_dual(loss).tangent is not None
            if step % 100 == 0:  # forward over reverse finds the saved tangents
                (grad,) = torch.autograd.grad(loss, w)
                assert fwAD.unpack_dual(grad).tangent is not None
            del loss
        gc.collect()
        assert len(level.saved) < 64, len(level.saved)
        assert len(level.tensors) < 4_096, len(level.tensors)


def _block(x, weight, seen):
    """Three layers that save their inputs and outputs for backward; `seen` gets
    weak references to the tangents of the values inside."""
    for _ in range(3):
        x = torch.tanh(x @ weight) * 1.5
        seen.append(weakref.ref(fwAD.unpack_dual(x).tangent))
    return x


@pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpoint", "direct"])
def test_checkpoint_inside_a_level_frees_what_it_recomputes(backend, checkpointed):
    """torch.utils.checkpoint (non-reentrant) inside a level, with a weight that
    requires grad: the values inside the checkpoint die as the call returns, and
    their tangents with them (native forward AD keeps them, pytorch#129293);
    called directly, autograd saves those values and their tangents live on.
    Forward over reverse through the checkpoint's recomputation gives the direct
    call's result (checkpointing.py: the recomputed values' tangents reach
    autograd's unpacking)."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    w = (torch.randn(32, 32) / 6).requires_grad_()
    x, tx, tw = torch.randn(8, 32), torch.randn(8, 32), torch.randn(32, 32)
    results = []
    for run_checkpointed in (checkpointed, False):
        seen: list[weakref.ref] = []
        with fwAD.dual_level():
            dual_x, dual_w = fwAD.make_dual(x, tx), fwAD.make_dual(w, tw)
            if run_checkpointed:
                out = checkpoint(_block, dual_x, dual_w, seen, use_reentrant=False)
            else:
                out = _block(dual_x, dual_w, seen)
            gc.collect()
            alive = [ref() is not None for ref in seen[:-1]]
            assert alive == [not run_checkpointed] * 2, alive
            (grad,) = torch.autograd.grad(out.square().sum(), w)
            results.append(fwAD.unpack_dual(grad))
    torch.testing.assert_close(results[0].primal, results[1].primal)
    torch.testing.assert_close(results[0].tangent, results[1].tangent)
