"""Benchmark: a dual all_reduce against a plain one of the same bytes.

2 processes, gloo on one machine, float32: `dist.all_reduce` of a dual of n
elements inside a dualgen dual level (value and tangent packed into one message
of 2n) against a plain `dist.all_reduce` of 2n elements, and of n, outside any
dual level (as a program without forward AD runs them), and against a value and
its tangent packed by hand into one buffer (cat, all_reduce, copy back: what a
program would do to send both in one message without dualgen); and a dual from
`dualgen.distributed.make_packed_dual` (value and tangent side by side in one
buffer, sent as they lie). Interleaved in one run, median of the rounds (each
round a batch of calls; every rank times the same calls, rank 0 reports).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import allocator
import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

import dualgen.forward_ad as fwAD
from dualgen.distributed import make_packed_dual

# the examples' process plumbing (examples/distributed/processes.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.distributed.processes import spawn


def _time(fn, calls: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _medians(n: int, rounds: int, group=None) -> dict:
    """Seconds per call of each all_reduce over `group` (None: every rank): the
    plain ones outside any dual level, as a program without forward AD runs
    them."""
    calls = 200 if n < 1 << 16 else 10
    plain, doubled = torch.randn(n), torch.randn(2 * n)
    value, tangent = torch.randn(n), torch.randn(n)

    def dual_all_reduce(make_dual) -> float:
        with fwAD.dual_level():
            dual = make_dual(value, tangent)
            return _time(lambda: dist.all_reduce(dual, group=group), calls)

    buffer = torch.empty(2 * n)

    def by_hand() -> None:  # what a program without dualgen would write
        torch.cat([value, tangent], out=buffer)
        dist.all_reduce(buffer, group=group)
        value.copy_(buffer[:n])
        tangent.copy_(buffer[n:])

    cases = {
        "dual (n)": lambda: dual_all_reduce(fwAD.make_dual),
        "packed dual (n)": lambda: dual_all_reduce(make_packed_dual),
        "by hand": lambda: _time(by_hand, calls),
        "plain (2n)": lambda: _time(
            lambda: dist.all_reduce(doubled, group=group), calls
        ),
        "plain (n)": lambda: _time(lambda: dist.all_reduce(plain, group=group), calls),
    }
    times = {k: [] for k in cases}
    for round_ in range(rounds + 1):  # (the first a warm-up)
        for name, timed in cases.items():
            seconds = timed()
            if round_:
                times[name].append(seconds)
    return {k: statistics.median(v) for k, v in times.items()}


class _PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _passed_through(group, rounds: int) -> float:
    """Seconds per plain all_reduce of 32 elements under a mode that does
    nothing but call each op: what any Python dispatch mode costs a c10d op."""
    doubled = torch.randn(32)
    times = []
    for _ in range(rounds):
        with _PassThrough():
            times.append(_time(lambda: dist.all_reduce(doubled, group=group), 200))
    return statistics.median(times)


def _rank(rank: int, world_size: int, sizes, rounds: int, as_is: bool) -> None:
    footnote = "malloc as the C library sets it" if as_is else allocator.steady_heap()
    lines = []
    for n in sizes:
        # (small messages: gloo's latency on two busy cores wanders from round
        # to round, so three times the rounds)
        median = _medians(n, 3 * rounds if n < 1 << 16 else rounds)
        same_bytes = median["plain (2n)"]
        lines.append(
            f"| {n} | {median['plain (n)'] * 1e6:.0f} µs "
            f"| {same_bytes * 1e6:.0f} µs "
            f"| {median['by hand'] * 1e6:.0f} µs "
            f"| {median['dual (n)'] * 1e6:.0f} µs "
            f"| {median['dual (n)'] / same_bytes:.2f}x "
            f"| {median['dual (n)'] / median['by hand']:.2f}x "
            f"| {median['packed dual (n)'] * 1e6:.0f} µs "
            f"| {median['packed dual (n)'] / same_bytes:.2f}x |"
        )
    # dualgen's own time: each rank alone in a group (no message leaves it)
    alone = [dist.new_group([r]) for r in range(2)][rank]
    own = _medians(16, rounds, alone)
    passing = _passed_through(alone, rounds)
    if rank == 0:
        print(
            f"torch {torch.__version__}, gloo, 2 processes, float32, median of "
            f"{rounds} rounds ({3 * rounds} below 65536 elements), {footnote}\n"
        )
        print(
            "| elements n | plain all_reduce (n) | plain all_reduce (2n, the same bytes) "
            "| value and tangent packed by hand (cat, all_reduce, copy back) "
            "| dual all_reduce (n) | dual / plain of the same bytes "
            "| dual / packed by hand | dual from make_packed_dual "
            "| make_packed_dual's / plain of the same bytes |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(lines))
        print(
            "\nIn a group of one process (n = 16, no message leaves the process): "
            f"plain all_reduce {own['plain (2n)'] * 1e6:.0f} µs, "
            f"the same under a dispatch mode that only passes ops through "
            f"{passing * 1e6:.0f} µs (torch's own cost of a c10d op dispatched "
            f"from Python), dual all_reduce {own['dual (n)'] * 1e6:.0f} µs, "
            f"make_packed_dual's {own['packed dual (n)'] * 1e6:.0f} µs",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    allocator.add_argument(parser)
    args = parser.parse_args()
    sizes = [16, 1 << 14] if args.quick else [16, 1 << 14, 1 << 20, 1 << 22]
    spawn(_rank, 2, sizes, 5 if args.quick else 11, args.malloc_as_is)


if __name__ == "__main__":
    main()
