"""What one `apply` works with: the call, the ctx's raw C++ fields, and the record
of what forward / setup_context put on the ctx (caught by `hooks`)."""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass

import torch
from torch.autograd.function import _SingleLevelFunction

FIELDS = ("to_save", "saved_for_forward", "dirty_tensors", "non_differentiable")
RAW = {name: torch._C._FunctionBase.__dict__[name] for name in FIELDS}
NEEDS_INPUT_GRAD = torch._C._FunctionBase.__dict__["needs_input_grad"]
RECORD = "_dualgen_record"
# The inputs a recording tape differentiates, while its apply runs (hooks._NEEDS).
TAPE_NEEDS = "_dualgen_tape_needs"


@dataclass
class Record:
    """What forward / setup_context put on a ctx (C++ clears the fields after)."""

    to_save: tuple | None = None
    saved_for_forward: tuple | None = None
    dirty_tensors: tuple | None = None
    non_differentiable: tuple | None = None


class _Capture(threading.local):
    def __init__(self) -> None:
        # One [backward class, ctx] frame per `_run_primal` in progress; a tape's
        # frame also holds the inputs it differentiates (hooks._ctx_init).
        self.pending: list[list] = []


CAPTURE = _Capture()


NO_MATERIALIZE = "_dualgen_no_materialize"


def materializes(ctx) -> bool:
    return not ctx.__dict__.get(NO_MATERIALIZE, False)


def record_of(ctx) -> Record:
    return ctx.__dict__.get(RECORD) or Record()


@dataclass
class Call:
    """One `cls.apply(*args, **kwargs)` that has inputs with tangents."""

    cls: type
    args: tuple
    kwargs: dict
    scan: list  # the tensors among args and kwargs
    grad_enabled: bool  # the user's grad mode (jvp and backward run in it)
    inputs: tuple | None = None  # forward's inputs as the C++ apply binds them

    @property
    def name(self) -> str:
        return self.cls.__name__  # as native names it (`{name}Backward`)


def bound_inputs(call: Call) -> tuple:
    """forward's inputs as the C++ apply passes them: positional arguments, then
    keyword arguments at their parameters' positions (after `setup_context`'s
    Function.apply has bound the defaults)."""
    cls, args, kwargs = call.cls, call.args, call.kwargs
    has_setup = has_setup_context(cls)
    if has_setup:
        bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    if not kwargs:
        return tuple(args)
    names = list(inspect.signature(cls.forward).parameters)[0 if has_setup else 1 :]
    slots = list(args) + [None] * (len(names) - len(args))
    last = len(args) - 1
    for key, value in kwargs.items():
        position = names.index(key)
        slots[position] = value
        last = max(last, position)
    return tuple(slots[: last + 1])


def has_setup_context(cls: type) -> bool:
    return cls.setup_context is not _SingleLevelFunction.setup_context
