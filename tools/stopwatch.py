"""Wall time by pipeline stage, for `dualgen generate -v`.

One stage (load) ends inside `checked_spec`, which other commands share, so the
running clock is found through a context variable instead of being passed down:
code run without a clock pays one lookup and records nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_RUNNING: ContextVar[Stopwatch | None] = ContextVar("dualgen_stopwatch", default=None)


class Stopwatch:
    """Laps: each `lap(stage)` charges the time since the previous lap to `stage`."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage] = self.laps.get(stage, 0.0) + now - self._last
        self._last = now

    @property
    def total(self) -> float:
        return self._last - self.started

    def summary(self) -> str:
        """`load 0.05s, build 0.40s, ...` in the order the stages ran."""
        return ", ".join(f"{stage} {s:.2f}s" for stage, s in self.laps.items())


@contextmanager
def running() -> Iterator[Stopwatch]:
    """A stopwatch that `lap` below reaches while the block runs."""
    clock = Stopwatch()
    token = _RUNNING.set(clock)
    try:
        yield clock
    finally:
        _RUNNING.reset(token)


def lap(stage: str) -> None:
    """End `stage` on the running stopwatch, if there is one."""
    clock = _RUNNING.get()
    if clock is not None:
        clock.lap(stage)
