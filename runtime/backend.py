"""Which generated kernels compute tangents: the C++ ones or the Python ones.

`DUALGEN_KERNELS=cpp|python` chooses at import; without it dualgen uses the C++
kernels when the extension is built and up to date with its sources, and the
Python kernels otherwise (saying once why and how to build).
`set_kernel_backend(name)` switches between levels; `kernel_backend()` says
which is in use. User rules (`register_jvp`) are Python under either; a kernel
table other than the installed one (a spec under test) runs its Python kernels.

What depends on the choice follows it (`follow(fn)`: the rule table, the hot
path's policy), so this module imports neither and both can ask it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

from . import cpp
from .levels import STATE

BACKENDS = ("cpp", "python")
VARIABLE = "DUALGEN_KERNELS"
_current: str | None = None
_followers: list[Callable[[str], None]] = []


def kernel_backend() -> str:
    """'cpp' or 'python': the kernels forward mode runs."""
    global _current
    if _current is None:
        _current = _initial()
        _tell_followers(_current)
    return _current


def follow(fn: Callable[[str], None]) -> None:
    """Call `fn(name)` with the backend each time one is chosen (now, if one
    is): how the rule table and the hot path follow it."""
    _followers.append(fn)
    if _current is not None:
        fn(_current)


def _tell_followers(name: str) -> None:
    for fn in _followers:
        fn(name)


def set_kernel_backend(name: str) -> None:
    """Run the `name` kernels ('cpp' or 'python') from now on; outside any dual
    level (a level's tangents are computed by one backend)."""
    global _current
    if name not in BACKENDS:
        raise ValueError(f"kernel backend must be one of {BACKENDS}, not {name!r}")
    if STATE.levels:
        raise RuntimeError("set_kernel_backend: exit every dual level first")
    if name == "cpp":
        cpp.extension()  # FileNotFoundError / StaleExtension say what to do
    _current = name
    _tell_followers(name)


def _initial() -> str:
    chosen = os.environ.get(VARIABLE)
    if chosen is not None:
        if chosen not in BACKENDS:
            raise ValueError(f"{VARIABLE} must be one of {BACKENDS}, not {chosen!r}")
        if chosen == "cpp":
            cpp.extension()
        return chosen
    state = cpp.state()
    if state != "built":
        import torch

        why = {
            "stale": "are older than their sources",
            "missing": f"are not built for torch {torch.__version__}",
        }[state]
        warnings.warn(
            f"dualgen's C++ kernels {why}: using the Python kernels (run `dualgen "
            "build` once, a few minutes; DUALGEN_KERNELS=python says this is meant)",
            stacklevel=3,
        )
    return "cpp" if state == "built" else "python"
