"""Hand-written helpers that one-source helpers (helpers/*.yaml) may call: small
utilities the formula vocabulary cannot write (sorting, Python's list building).

A leaf module: it imports torch alone, so the generated helpers that call it and
the hand-written families that call those import one way. Each has a C++ twin in
runtime/csrc/dualgen/formulas/basics.cpp, declared in twins.yaml.
"""

from __future__ import annotations

__all__ = ["reduction_dims"]


def reduction_dims(dim, ndim: int) -> list[int]:
    """The dims a reduction over `dim` covers (None, [] or () for all; an int for
    one), wrapped and sorted; 0s for a 0-d input."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return sorted(d % ndim if ndim else 0 for d in dim)
