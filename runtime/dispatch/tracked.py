"""Running an op under autograd for reverse-over-forward.

When a formula reads the op's outputs and autograd is recording, the op runs once
with autograd enabled, so the outputs the formula reads are in the graph; the mode
hands back detached aliases of them, on which the autograd layer above records its
own node.

That makes two nodes of the op, and reverse over forward reaches the input
through both: the gradient of the user's uses of the outputs through the layer's,
that of the tangent through the mode's. Autograd sums them, which is right where
the op's backward is linear in its gradients, as almost every backward is. A
backward that projects out a gauge is not (linalg.eig's, and eigh's and svd's of
complex matrices: the phase of each eigenvector or pair of singular vectors):
each node gets a part of the gradient that depends on the phase, though their
sum does not, so torch refuses the part as ill-defined, or, where each part is
small, projects each part its own way (by whether the eigenvalues' gradient is
given) and the sum is wrong. For those ops (`mode._ONE_NODE`), with the Python
kernels, the formula runs once the layer above has recorded the op
(`defer_formula`): it reads the outputs the user gets, as native forward AD and
the C++ front kernel do, so the op has one node. It runs before anything reads
the tangents or can change what the formula reads (the next op the mode sees, a
tangent read: `tangents.tangent_of`, `levels.copy_entries`), with gradients
recorded as at the op; the level's end drops it. Other ops keep computing their
tangents at once: a formula run later runs in whatever context the next op has
(saved-tensor hooks such as checkpoint's, vmap, autocast).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..levels import STATE, copy_entries
from ..tangents import (
    autograd_enabled,
    handling_levels_below,
    remember_saved_outputs,
)


def run_tracked(func, args, kwargs, many: bool):
    """Run a functional op once with autograd recording. Returns what the mode
    hands back (each output as a detached alias: the autograd layer above records
    its own node on it) and the recorded outputs the formula reads."""
    with autograd_enabled():
        tracked = func(*args, **kwargs)
    outputs = tuple(tracked) if many else (tracked,)
    plain = tuple(_detached_alias(o) for o in outputs)
    return (plain if many else plain[0]), outputs


def _detached_alias(value):
    """`value` without autograd history, sharing its memory, version counter and
    tangents (the tangents of the levels below the one being handled)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_detached_alias(v) for v in value)
    if not isinstance(value, torch.Tensor) or not value.requires_grad:
        return value
    if type(value) is torch.Tensor:
        # The mode must not see this detach (it would derive a view's tangent);
        # excluding the Python key is the cheap way when no subclass needs it.
        with torch._C._ExcludeDispatchKeyGuard(PYTHON_KEYS):
            alias = value.detach()
    else:
        with _disable_current_modes():
            alias = value.detach()
    copy_entries(value, alias)
    return alias


PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | (
    torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot)
)


def autograd_records(primals, tangents) -> bool:
    """True if autograd records: a primal or tangent requires grad."""
    if not torch.is_grad_enabled():
        return False
    for values in (primals, tangents):
        for v in values:
            if isinstance(v, torch.Tensor):
                if v.requires_grad:
                    return True
            elif isinstance(v, (list, tuple)):
                for item in v:
                    if isinstance(item, torch.Tensor) and item.requires_grad:
                        return True
    return False


def defer_formula(mode, level, compute, outputs: tuple, tracked: tuple) -> None:
    """Compute the tangents of `outputs` (what the mode hands back from
    `run_tracked`) by `compute(outputs, read)` once the autograd layer above the
    mode has recorded the op: `read` holds, per output, the output itself where
    that layer gave it history, else the recorded output (`tracked`: no layer
    above records the op, as in an op the mode itself runs below autograd)."""
    STATE.pending.append(_Deferred(mode, level, compute, outputs, tracked))


class _Deferred:
    __slots__ = ("compute", "level", "mode", "outputs", "tracked")

    def __init__(self, mode, level, compute, outputs, tracked) -> None:
        self.mode = mode
        self.level = level
        self.compute = compute
        self.outputs = outputs
        self.tracked = tracked

    def __call__(self) -> None:
        read = tuple(_recorded(o, t) for o, t in zip(self.outputs, self.tracked))
        level = self.level
        with (
            handling_levels_below(level, self.mode),
            autograd_enabled(),
            torch.enable_grad(),  # recorded at the op (`autograd_records`)
        ):
            self.compute(self.outputs, read)
        remember_saved_outputs(level, self.outputs)


def _recorded(output, tracked):
    """`output` where the autograd layer above the mode recorded it, else `tracked`."""
    if isinstance(output, (list, tuple)):
        return type(output)(_recorded(o, t) for o, t in zip(output, tracked))
    if isinstance(output, torch.Tensor) and output.requires_grad:
        return output
    return tracked


def defers(func) -> bool:
    """Whether the formula of `func`, an op autograd records and whose formula
    reads its outputs, runs once the autograd layer above the mode has recorded
    the op, reading the outputs the user gets (`defer_formula`): for the ops whose
    backward is not additive over parts of the gradient (`_ONE_NODE`). The mode
    asks only with the Python kernels (the C++ front kernel runs ops above
    autograd) and for functional ops."""
    return func in _ONE_NODE


# Ops whose backward projects out a gauge of their outputs (the phase of each
# eigenvector or pair of singular vectors): given the gradient in two parts, one
# per node of the op, it projects each part on its own (or refuses it as
# phase-dependent), which is not the projection of the sum. Each other op's
# backward is linear in its gradients: two nodes of it sum right.
_ONE_NODE = frozenset(
    {
        torch.ops.aten.linalg_eig.default,
        torch.ops.aten._linalg_eigh.default,
        torch.ops.aten._linalg_svd.default,
    }
)
