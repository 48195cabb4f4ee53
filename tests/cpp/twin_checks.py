"""What the tests of the C++ twins (test_twins_*.py) share: seeded inputs, and a
twin's results held to those of its Python helper in dualgen.formulas."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as py

TOL = 1e-12
F64 = torch.float64


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator(DEVICE).manual_seed(seed)


def randn(*shape, dtype=F64, g=None):
    return torch.randn(*shape, dtype=dtype, generator=g)


def rand(*shape, dtype=F64, seed=0):
    """Drawn in float64 and cast: every dtype sees the same values."""
    return randn(*shape, g=gen(seed)).to(dtype)


def tangents(g, absent, **primals):
    """A random tangent like each primal, drawn in order; zeros for the one named
    `absent` (what a kernel passes for an absent tangent)."""
    drawn = {name: randn(*p.shape, dtype=p.dtype, g=g) for name, p in primals.items()}
    return [torch.zeros_like(t) if name == absent else t for name, t in drawn.items()]


def same(cpp, ref, tol=TOL, equal_nan=False):
    """Same None-ness, and equal values (dtype and shape too) where present;
    tuples and lists elementwise."""
    if isinstance(ref, (tuple, list)):
        assert isinstance(cpp, (tuple, list)) and len(cpp) == len(ref)
        for c, r in zip(cpp, ref):
            same(c, r, tol, equal_nan)
        return
    assert (cpp is None) == (ref is None)
    if ref is not None:
        assert cpp.dtype == ref.dtype and cpp.shape == ref.shape
        torch.testing.assert_close(cpp, ref, rtol=tol, atol=tol, equal_nan=equal_nan)


def both(cpp_formulas, name, *args, tol=TOL, equal_nan=False):
    """The twin and the helper called `name` on the same arguments agree; their
    results, (twin's, helper's)."""
    ref = getattr(py, name)(*args)
    cpp = getattr(cpp_formulas, name)(*args)
    same(cpp, ref, tol, equal_nan)
    return cpp, ref


def same_error(cpp_formulas, name, *args, error=Exception):
    """The helper raises `error`, and the twin what the helper raises (type and
    first line of text)."""
    with pytest.raises(error) as ref:
        getattr(py, name)(*args)
    with pytest.raises(type(ref.value)) as out:
        getattr(cpp_formulas, name)(*args)
    first = str(ref.value).splitlines()[0]
    assert str(out.value).splitlines()[0] == first
