"""The torch releases dualgen is tested with, and the one warning a user of
another release gets (once, at `import dualgen`).

Keep TESTED equal to the releases CI runs and to pyproject's torch range.
"""

from __future__ import annotations

import warnings

import torch

# (major, minor) releases CI runs: the pinned one (constraints.txt) whole, the
# others by .ci/release
TESTED = ((2, 12), (2, 13), (2, 14))


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string ('2.13.0+cpu' -> (2, 13))."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def tested_range() -> str:
    low, high = min(TESTED), max(TESTED)
    return f"{low[0]}.{low[1]}" + ("" if low == high else f" to {high[0]}.{high[1]}")


def warn_if_untested(version: str = torch.__version__) -> None:
    """A warning naming the tested range when `version` is outside it."""
    if release(version) in TESTED:
        return
    side = "newer" if release(version) > max(TESTED) else "older"
    warnings.warn(
        f"dualgen is tested with torch {tested_range()}; torch {version} is "
        f"{side}: tangents may be missing or wrong where torch changed",
        stacklevel=3,
    )
