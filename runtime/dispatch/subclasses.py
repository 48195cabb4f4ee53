"""Tensor subclasses with a dispatch of their own, as the dual mode meets them.

A subclass's op goes to the subclass (`deferring`), whose ops on the tensors it
wraps come back to the mode; a jagged nested tensor's likewise, run by the mode
itself (`jagged_op`), as its tangents live on its values (jagged.py).
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import _pop_mode, _push_mode

from ..levels import STATE
from ..tangents import autograd_enabled
from . import jagged
from .tracked import autograd_records

_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


def dispatches_itself(types) -> bool:
    """True if an argument is a tensor subclass with its own __torch_dispatch__
    (`types`: the argument types torch hands the mode). Fake tensors under their
    fake mode (a tensor subclass's sharding propagation, DTensor's) are not: the
    mode below ours runs their ops."""
    for t in types:
        if t is not torch.Tensor and t.__torch_dispatch__ is not _PLAIN_DISPATCH:
            if t is _FakeTensor() and _fake_mode_active():
                continue
            return True
    return False


@functools.cache
def _FakeTensor() -> type:
    from torch._subclasses.fake_tensor import FakeTensor

    return FakeTensor


def _fake_mode_active() -> bool:
    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None


def deferring(mode, func, args, kwargs):
    """Run `func` on arguments that include a tensor subclass with its own
    __torch_dispatch__, with this mode on the stack (torch pops it while the mode
    runs): the mode declines the call (NotImplemented), so the subclass's dispatch
    runs it, and ops the subclass re-enters dispatch with reach the mode (with no
    mode on the stack they fail torch's "no arguments had PyInterpreter" assert)."""
    STATE.defer_next = True
    _push_mode(mode)
    try:
        return func(*args, **kwargs)
    finally:
        _pop_mode()
        STATE.defer_next = False


def jagged_op(mode, func, types, args, kwargs):
    """An op with a jagged nested tensor: their tangents live on their values
    (jagged.py), so the subclass runs it, its ops on values coming back here.
    Where autograd records, so do they: the tangents they give are then
    differentiable (forward over reverse), as the subclass's own graph, above,
    is not."""
    previous, STATE.subclass_op = STATE.subclass_op, True
    _push_mode(mode)
    try:
        if jagged.reads_values(func):
            return jagged.values_alias(args[0] if args else kwargs["self"])
        if autograd_records(args, tuple(kwargs.values())):
            with autograd_enabled():
                return jagged.run(func, types, args, kwargs)
        return jagged.run(func, types, args, kwargs)
    finally:
        _pop_mode()
        STATE.subclass_op = previous
