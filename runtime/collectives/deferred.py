"""A c10d collective's Work that writes what arrived when it is waited for.

A collective of duals sends packed tensors and receives into packed buffers;
the caller's tensors get their values and tangents from those buffers only once
the data is there. Waiting for it when the op is issued would make every
`irecv` and `async_op=True` collective blocking, and a blocking irecv deadlocks
the most common point-to-point code (each rank posts its irecv, then its
isend; `batch_isend_irecv`). So the op returns a `Deferred` Work: its `wait()`
waits for the packed collective, then writes the values and tangents (the
`finish` it was given), once. `dist.all_reduce` without `async_op` waits for
it at once, as it waits for any Work.

A Work written in Python keeps its `wait` only while its Python object lives,
and the dispatcher hands it on as a C++ object: every Deferred is held by its
level until it finishes (or the level ends). Code that never waits (undefined for
c10d) still gets its values: each collective first finishes every pending
one whose data has arrived.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode,
    _pop_mode,
    _push_mode,
)

from ..levels import STATE
from ..tangents import handling_levels_below


class Deferred(dist.Work):
    def __init__(self, works: list, finish, result: list, level) -> None:
        super().__init__()
        self._works = works  # the packed collective's Works, in the order issued
        self._finish = finish  # writes what arrived into the caller's tensors
        self._result = result  # what the native Work's future holds
        self._level = level
        level.pending_works[id(self)] = self

    def wait(self, timeout=None) -> bool:
        if self._finish is not None:
            for work in self._works:
                work.wait() if timeout is None else work.wait(timeout)
            self._finished()
        return True

    def _finished(self) -> None:
        finish, self._finish = self._finish, None
        self._level.pending_works.pop(id(self), None)
        level = self._level
        if not STATE.levels:  # (every level gone: the values alone)
            return finish(False)
        alive = level.index < len(STATE.levels) and STATE.levels[level.index] is level
        # As inside the mode's dispatch (off the stack, waited for from user
        # code): under the levels below this one, since the packed values carry
        # their tangents. A level gone since: its tangents went with it.
        mode = STATE.mode
        off = _get_current_dispatch_mode() is mode and _pop_mode()
        try:
            with handling_levels_below(level, mode):
                finish(alive)
        finally:
            if off:
                _push_mode(mode)

    # What Python code asks of a Work, answered for the collective as a whole.
    def is_completed(self) -> bool:
        if self._finish is not None and all(w.is_completed() for w in self._works):
            self._finished()
        return self._finish is None

    def is_success(self) -> bool:
        return self.is_completed() and all(w.is_success() for w in self._works)

    def exception(self):
        return next((w.exception() for w in self._works if w.exception()), None)

    def get_future(self) -> torch.futures.Future:
        self.wait()  # (so what the future holds is written)
        future = torch.futures.Future()
        future.set_result(self._result)
        return future

    def result(self) -> list:
        self.wait()
        return self._result

    def synchronize(self) -> None:
        self.wait()

    def source_rank(self) -> int:
        return self._works[-1].source_rank()

    def _source_rank(self) -> int:
        return self._works[-1]._source_rank()


def deferred(works: list, finish, result: list, level) -> torch.ScriptObject:
    """A Work for the dispatcher to return: `finish(alive)` writes what arrived
    (its tangents only while `alive`, the level still active) when waited for."""
    return Deferred(works, finish, result, level).boxed()


def finish_arrived() -> None:
    """Finish every pending collective whose data has arrived."""
    for level in STATE.levels:
        for pending in list(level.pending_works.values()):
            pending.is_completed()
