"""Run code in a fresh, empty working directory and fail if it leaves anything there.

Defence in depth for running formulas: the vocabulary (`formula.py`,
`admissible.py`) already refuses what writes files, and `empty_cwd()` checks that
nothing did. `dualgen validate` runs each kernel under it, and the kernel tests run
each case under it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SHOWN = 10  # names listed in the message; the rest are counted


class FilesWritten(AssertionError):
    """Code run under `empty_cwd()` left files (or directories) in it."""

    def __init__(self, names: list[str]):
        self.names = names
        shown = ", ".join(names[:_SHOWN])
        more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
        super().__init__(f"wrote into its working directory: {shown}{more}")


@contextmanager
def empty_cwd(prefix: str = "dualgen-cwd-") -> Iterator[Path]:
    """Run the body with the working directory set to a fresh temporary directory.

    The old working directory is restored on the way out, exceptions included, and
    the directory removed. If anything is left in it, raise FilesWritten naming what
    (replacing an exception the body raised: writing files is the graver fault; the
    body's exception stays chained as its context)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as d:
        root = Path(d)
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(old)
            left = _contents(root)
            if left:
                raise FilesWritten(left)


def _contents(root: Path) -> list[str]:
    """Every entry below `root` (files, directories, links), relative, sorted."""
    found = []
    for parent, dirs, files in os.walk(root, followlinks=False):
        here = Path(parent).relative_to(root)
        found.extend(str(here / name) for name in dirs + files)
    return sorted(found)
