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
level until it finishes (or the level ends). Code that never waits (undefined
for c10d) still gets its values where the process group says they arrived:
each collective first finishes every pending one reported complete.
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
        self._works = works  # the packed collective's Works still to wait for
        self._waited = []  # and those waited for
        self._finish = finish  # writes what arrived into the caller's tensors
        self._result = result  # what the native Work's future holds
        self._level = level
        self._levels = STATE.levels  # (the issuing thread's)
        level.pending_works[id(self)] = self

    def wait(self, timeout=None) -> bool:
        if self._finish is not None:
            while self._works:  # (each once: gloo's recv waited for twice
                work = self._works[0]  # waits for a second message)
                work.wait() if timeout is None else work.wait(timeout)
                self._waited.append(self._works.pop(0))
            self._finished()
        return True

    def _finished(self) -> None:
        level, levels = self._level, self._levels
        alive = level.index < len(levels) and levels[level.index] is level
        # Levels are per thread: waited for on another thread than the one
        # that issued it, only the outermost level's tangents can be written
        # (they need no mode: they are the tensors' own).
        elsewhere = levels is not STATE.levels
        if elsewhere and alive and level.index > 0:
            raise RuntimeError(
                "dualgen: a collective issued inside nested dual levels was waited "
                "for on another thread; wait for it on the thread that issued it"
            )
        finish, self._finish = self._finish, None
        level.pending_works.pop(id(self), None)
        if elsewhere or not levels:  # (every level gone: the values alone)
            return finish(alive)
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
            self.wait()
        return self._finish is None

    def is_success(self) -> bool:
        return self.is_completed() and all(w.is_success() for w in self._all())

    def exception(self):
        return next((w.exception() for w in self._all() if w.exception()), None)

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
        return self._all()[-1].source_rank()

    def _source_rank(self) -> int:
        return self._all()[-1]._source_rank()

    def _all(self) -> list:
        return self._waited + self._works


def deferred(works: list, finish, result: list, level) -> torch.ScriptObject:
    """A Work for the dispatcher to return: `finish(alive)` writes what arrived
    (its tangents only while `alive`, the level still active) when waited for."""
    return Deferred(works, finish, result, level).boxed()


def finish_arrived() -> None:
    """Finish every pending collective whose data has arrived."""
    for level in STATE.levels:
        for pending in list(level.pending_works.values()):
            pending.is_completed()
