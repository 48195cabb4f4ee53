"""Hand-written helpers that one-source helpers (helpers/*.yaml) may call: small
utilities the formula vocabulary cannot write (sorting, Python's list building).

A leaf module, outside the `dualgen.formulas` package: it imports torch alone,
and importing it runs no package that re-exports the generated helpers, so the
generated helpers that call it and the hand-written families that call those
import one way, whichever is imported first. Each has a C++ twin in
runtime/csrc/dualgen/formulas/basics.cpp, declared in twins.yaml.
"""

from __future__ import annotations

import torch

__all__ = [
    "channel_shape",
    "concat_ints",
    "dim_range",
    "int_list",
    "lengths_mask",
    "no_derivative",
    "reduction_dims",
    "refuse_dropout",
]


def reduction_dims(dim, ndim: int) -> list[int]:
    """The dims a reduction over `dim` covers (None, [] or () for all; an int for
    one), wrapped and sorted; 0s for a 0-d input."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return sorted(d % ndim if ndim else 0 for d in dim)


def dim_range(lo: int, hi: int) -> list[int]:
    """The dims lo, lo + 1, ..., hi - 1 (Python's list(range(lo, hi)))."""
    return list(range(lo, hi))


def concat_ints(a, b) -> list[int]:
    """Two lists of ints joined (Python's list(a) + list(b))."""
    return list(a) + list(b)


def channel_shape(ndim: int, axis: int) -> list[int]:
    """[1] * ndim with -1 at `axis`: the shape that views a vector along `axis`
    of an ndim-d tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return shape


def int_list(t) -> list[int]:
    """The values of an integer tensor (sequence offsets or lengths), flattened, as
    a list of ints: read on the host (a device tensor is copied there)."""
    return [int(v) for v in t.reshape(-1).tolist()]


def refuse_dropout(dropout_p: float, op: str) -> bool:
    """Raise unless dropout_p is 0: `op` draws its random numbers inside the
    kernel, so it has no derivative for dropout_p > 0 (True otherwise)."""
    if dropout_p != 0.0:
        raise RuntimeError(
            f"dualgen: {op} with dropout_p={dropout_p} draws random numbers inside "
            "the kernel: it has no derivative; only dropout_p=0 is differentiable"
        )
    return True


def no_derivative(op: str, argument: str, value: str):
    """Raise NotImplementedError: `op` has no derivative for `argument`=`value`
    (a helper's branch for values it does not differentiate; returns nothing)."""
    raise NotImplementedError(f"{op}: no derivative for {argument}={value!r}")


def lengths_mask(lengths, steps: int, like):
    """The [steps, B] mask t < lengths[b] (sequence lengths as an int list or a
    tensor), on like's device."""
    lengths = torch.as_tensor(lengths, device=like.device)
    t = torch.arange(steps, device=like.device)
    return t.unsqueeze(1) < lengths.unsqueeze(0)
