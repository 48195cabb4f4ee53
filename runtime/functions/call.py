"""What one `apply` works with: the call, the ctx's raw C++ fields, and the record
of what forward / setup_context put on the ctx (caught by `hooks`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

_FIELDS = ("to_save", "saved_for_forward", "dirty_tensors", "non_differentiable")
_RAW = {name: torch._C._FunctionBase.__dict__[name] for name in _FIELDS}
_NEEDS_INPUT_GRAD = torch._C._FunctionBase.__dict__["needs_input_grad"]
_RECORD = "_dualgen_record"


@dataclass
class _Record:
    """What forward / setup_context put on a ctx (C++ clears the fields after)."""

    to_save: tuple | None = None
    saved_for_forward: tuple | None = None
    dirty_tensors: tuple | None = None
    non_differentiable: tuple | None = None


class _Capture(threading.local):
    def __init__(self) -> None:
        # One [backward class, ctx] frame per `_run_primal` in progress.
        self.pending: list[list] = []


_CAPTURE = _Capture()


_NO_MATERIALIZE = "_dualgen_no_materialize"


def _materializes(ctx) -> bool:
    return not ctx.__dict__.get(_NO_MATERIALIZE, False)


def _record(ctx) -> _Record:
    return ctx.__dict__.get(_RECORD) or _Record()


@dataclass
class _Call:
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
