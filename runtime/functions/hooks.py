"""The hooks: catching the ctx that the C++ apply creates, recording what is saved
or marked on it, and installing / uninstalling the patched `Function.apply`."""

from __future__ import annotations

import threading

import torch
from torch.autograd.function import BackwardCFunction, _SingleLevelFunction

from .apply import _apply
from .call import _CAPTURE, _FIELDS, _NO_MATERIALIZE, _RAW, _RECORD, _Record

# --------------------------------------------------------------------------------------
# catching the ctx and what is saved on it


def _ctx_init(self) -> None:
    """`BackwardCFunction.__init__` while installed: the C++ apply constructs the ctx
    (with no arguments) before calling forward, so the first ctx of the expected
    class after `_run_primal` opened its frame is that call's."""
    pending = _CAPTURE.pending
    if pending:
        frame = pending[-1]
        if frame[1] is None and type(self) is frame[0]:
            frame[1] = self
            self.__dict__[_RECORD] = _Record()


def _recording(name: str) -> property:
    """A property over the C++ field `name` that also records what is assigned on
    a caught ctx: FunctionCtx.save_for_backward & co. assign these fields."""
    raw = _RAW[name]

    def get(self):
        return raw.__get__(self, type(self))

    def set_(self, value) -> None:
        raw.__set__(self, value)
        record = self.__dict__.get(_RECORD)
        if record is not None:
            setattr(record, name, value)

    return property(get, set_, doc=f"ctx.{name}, recorded by dualgen")


_RAW_MATERIALIZE = torch._C._FunctionBase.__dict__["materialize_grads"]


def _set_materialize(self, value) -> None:
    _RAW_MATERIALIZE.__set__(self, value)
    self.__dict__[_NO_MATERIALIZE] = not value


def _get_materialize(self):
    return _RAW_MATERIALIZE.__get__(self, type(self))  # not readable, as native


# ctx.set_materialize_grads(False) assigns it; C++ has it write-only.
_MATERIALIZE = property(_get_materialize, _set_materialize)


# --------------------------------------------------------------------------------------
# installing


_INSTALL_LOCK = threading.Lock()
_INSTALLED = 0  # threads with active levels; the patches are process-wide


_CTX_HOOKED = False


def install() -> None:
    """Hook Function.apply (first level entered, any thread). The ctx class is
    hooked once for good: changing BackwardCFunction's attributes updates every
    Function's backward class (about 12 µs a time, paid on every level entered
    otherwise), and the hooks do nothing unless `_apply` is catching a ctx."""
    global _INSTALLED, _CTX_HOOKED
    with _INSTALL_LOCK:
        _INSTALLED += 1
        if _INSTALLED > 1:
            return
        _SingleLevelFunction.apply = classmethod(_apply)
        if not _CTX_HOOKED:
            BackwardCFunction.__init__ = _ctx_init
            for name in _FIELDS:
                setattr(BackwardCFunction, name, _recording(name))
            BackwardCFunction.materialize_grads = _MATERIALIZE
            _CTX_HOOKED = True


def uninstall() -> None:
    """Undo the apply hook when the last thread's last level exits."""
    global _INSTALLED
    with _INSTALL_LOCK:
        _INSTALLED -= 1
        if _INSTALLED > 0:
            return
        _INSTALLED = 0
        if "apply" in _SingleLevelFunction.__dict__:
            del _SingleLevelFunction.apply
