"""Resident memory from /proc/self/status, for the benchmarks' peak-memory runs
(standard library only: bench/taylor_jax.py runs in a venv without torch).

getrusage's maximum is not used: it includes the parent's size, inherited at fork.
"""

from __future__ import annotations


def status(field: str) -> int:
    """A /proc/self/status figure (VmRSS, VmHWM), in KiB."""
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> None:
    """Reset VmHWM to the current resident size."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
