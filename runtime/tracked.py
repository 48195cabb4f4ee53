"""Running an op under autograd for reverse-over-forward.

When a formula reads the op's outputs and autograd is recording, the op runs once
with autograd enabled, so the outputs the formula reads are in the graph; the mode
hands back detached aliases of them, on which the autograd layer above records its
own node.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .levels import copy_entries
from .tangents import autograd_enabled


def _run_tracked(func, args, kwargs, many: bool):
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
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
            alias = value.detach()
    else:
        with _disable_current_modes():
            alias = value.detach()
    copy_entries(value, alias)
    return alias


_PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | (
    torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot)
)


def _tracking(primals, tangents) -> bool:
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
