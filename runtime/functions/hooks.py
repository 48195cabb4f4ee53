"""The hooks: catching the ctx that the C++ apply creates, recording what is saved
or marked on it, and installing / uninstalling the patched `Function.apply`."""

from __future__ import annotations

import inspect
import threading

import torch
from torch.autograd.function import BackwardCFunction, Function, _SingleLevelFunction

from .. import torch_features
from .apply import apply_with_levels
from .backward import TAPES
from .call import (
    CAPTURE,
    FIELDS,
    NEEDS_INPUT_GRAD,
    NO_MATERIALIZE,
    RAW,
    RECORD,
    TAPE_NEEDS,
    Record,
)

# --------------------------------------------------------------------------------------
# catching the ctx and what is saved on it


def _ctx_init(self) -> None:
    """`BackwardCFunction.__init__` while installed: the C++ apply constructs the ctx
    (with no arguments) before calling forward, so the first ctx of the expected
    class after a frame was opened is that call's. It fills every innermost frame
    still waiting for one: a tape's and a level's can wait on the same call. A
    tape's frame also says which inputs `ctx.needs_input_grad` shows as needing a
    gradient (C++ sees none: the tape's inputs do not require grad)."""
    for frame in reversed(CAPTURE.pending):
        if frame[1] is not None or type(self) is not frame[0]:
            break
        frame[1] = self
        self.__dict__.setdefault(RECORD, Record())
        if len(frame) > 2:
            self.__dict__[TAPE_NEEDS] = frame[2]


def _recording(name: str) -> property:
    """A property over the C++ field `name` that also records what is assigned on
    a caught ctx: FunctionCtx.save_for_backward & co. assign these fields."""
    raw = RAW[name]

    def get(self):
        return raw.__get__(self, type(self))

    def set_(self, value) -> None:
        raw.__set__(self, value)
        record = self.__dict__.get(RECORD)
        if record is not None:
            setattr(record, name, value)

    return property(get, set_, doc=f"ctx.{name}, recorded by dualgen")


_RAW_MATERIALIZE = torch._C._FunctionBase.__dict__["materialize_grads"]


def _set_materialize(self, value) -> None:
    _RAW_MATERIALIZE.__set__(self, value)
    self.__dict__[NO_MATERIALIZE] = not value


def _get_materialize(self):
    return _RAW_MATERIALIZE.__get__(self, type(self))  # not readable, as native


# ctx.set_materialize_grads(False) assigns it; C++ has it write-only.
_MATERIALIZE = property(_get_materialize, _set_materialize)


def _get_needs(self) -> tuple:
    """ctx.needs_input_grad, with the inputs a recording tape differentiates."""
    needs = NEEDS_INPUT_GRAD.__get__(self)
    extra = self.__dict__.get(TAPE_NEEDS)
    if extra is None:
        return needs
    return tuple(bool(n) or e for n, e in zip(needs, extra))


_NEEDS = property(_get_needs, NEEDS_INPUT_GRAD.__set__)


# --------------------------------------------------------------------------------------
# installing


_INSTALL_LOCK = threading.Lock()
# Users of the patches, which are process-wide: threads' active levels,
# recording tapes (the gradcheck harness's backward mode), and Taylor series
# being propagated (dualgen.jet).
_USERS = {"levels": 0, "tapes": 0, "series": 0}


_CTX_HOOKED = False

# Where the patched apply goes, found by what this torch's Function.apply is:
# Python code that binds setup_context's defaults, checks functorch and calls
# `super().apply` (torch 2.13 and before): `_SingleLevelFunction.apply` is the
# hook while levels or tapes are active. Or the C++ `_FunctionBase.apply` itself,
# doing both inside (torch 2.14): `MyFunction.apply` bound before a level then
# reaches C++ directly, so `Function.apply` is replaced from `import dualgen` on,
# deferring to torch's while no level or tape is active.
_NATIVE_FUNCTION_APPLY = Function.__dict__["apply"]
_APPLY_IS_PYTHON = isinstance(_NATIVE_FUNCTION_APPLY, classmethod)


def _apply_binding_defaults(cls, *args, **kwargs):
    """`Function.apply` where torch's is C++ (see above): torch's own while
    nothing is active; else setup_context's defaults bound, as torch's Python
    apply bound them, then `apply_with_levels`."""
    if not any(_USERS.values()):
        return _NATIVE_FUNCTION_APPLY.__get__(None, cls)(*args, **kwargs)
    if cls.setup_context is not _SingleLevelFunction.setup_context:
        bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    return apply_with_levels(cls, *args, **kwargs)


# Named as torch's: messages and reprs that name `MyFunction.apply` stay the same.
_apply_binding_defaults.__name__ = "apply"
_apply_binding_defaults.__qualname__ = "Function.apply"


def install(user: str = "levels") -> None:
    """Hook Function.apply (first level entered or tape recording, any thread). The
    ctx class is hooked once for good: changing BackwardCFunction's attributes
    updates every Function's backward class (about 12 µs a time, paid on every
    level entered otherwise), and the hooks do nothing unless `apply_with_levels` or a tape is
    catching a ctx."""
    global _CTX_HOOKED
    torch_features.require("custom_function")
    with _INSTALL_LOCK:
        _USERS[user] += 1
        if sum(_USERS.values()) > 1:
            return
        if _APPLY_IS_PYTHON:
            _SingleLevelFunction.apply = classmethod(apply_with_levels)
        if not _CTX_HOOKED:
            BackwardCFunction.__init__ = _ctx_init
            for name in FIELDS:
                setattr(BackwardCFunction, name, _recording(name))
            BackwardCFunction.materialize_grads = _MATERIALIZE
            BackwardCFunction.needs_input_grad = _NEEDS
            _CTX_HOOKED = True


def uninstall(user: str = "levels") -> None:
    """Undo the apply hook when the last level exits and the last tape stops
    recording, in every thread."""
    with _INSTALL_LOCK:
        _USERS[user] = max(_USERS[user] - 1, 0)
        if sum(_USERS.values()) > 0:
            return
        if "apply" in _SingleLevelFunction.__dict__:
            del _SingleLevelFunction.apply


def start(tape) -> None:
    """`tape` records from now on (Tape.__enter__)."""
    TAPES.recording.append(tape)
    install("tapes")


def stop(tape) -> None:
    """`tape` stops recording (Tape.__exit__)."""
    TAPES.recording.remove(tape)
    uninstall("tapes")


if not _APPLY_IS_PYTHON:
    Function.apply = classmethod(_apply_binding_defaults)  # (see above)
