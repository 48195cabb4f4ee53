"""A steady heap for benchmarks that compare implementations in one process.

PyTorch's CPU tensors come from the C library's malloc. glibc hands the top of its
heap back to the system when enough of it is free, and moves its mmap threshold as
blocks come and go, so whether a large tensor lands on pages already mapped or on
fresh ones (each page then faulted in and zeroed) depends on what ran before. At
the large sizes that swings one implementation by up to 3x from run to run, by
which ran first, not by what it does (measured: the same 9-op chain at 2M floats,
0 or 4,000 page faults per call by the order of the implementations).

Fixed thresholds keep the freed memory in the heap: every implementation of the
run then reuses mapped pages, and the comparison measures the work. (PyTorch's
CPU tuning guide makes the same point and suggests jemalloc or tcmalloc.) Every
implementation runs under the same setting; `--malloc-as-is` measures without it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for its moving threshold
_TRIM_THRESHOLD = (1 << 31) - 1  # (an int) never give the heap's top back


def steady_heap() -> str:
    """Fix glibc's thresholds for this process; says what was done, for the table's
    footnote (another C library: nothing, and says so)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        done = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) and libc.mallopt(
            _M_TRIM_THRESHOLD, _TRIM_THRESHOLD
        )
    except (OSError, AttributeError, TypeError, ctypes.ArgumentError):
        done = 0
    if not done:
        return "malloc as the C library sets it (no glibc mallopt)"
    return "glibc malloc with fixed thresholds (bench/allocator.py)"


def add_argument(parser) -> None:
    parser.add_argument(
        "--malloc-as-is",
        action="store_true",
        help="leave glibc's moving heap thresholds as they are (see bench/allocator.py)",
    )


def parse_args(parser):
    """The arguments `parser` reads, --malloc-as-is among them, and the footnote
    of the heap setting they ask for (set up for this process)."""
    add_argument(parser)
    args = parser.parse_args()
    return args, configure(args)


def configure(args) -> str:
    """The heap setting the arguments ask for, and its footnote."""
    if args.malloc_as_is:
        return "malloc as the C library sets it"
    return steady_heap()
