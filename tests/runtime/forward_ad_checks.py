"""Shared by the test_forward_ad*.py modules: the same code runs under
`torch.autograd.forward_ad` and `dualgen.forward_ad` (passed in as `fwAD`), and
primals, tangents and gradients are compared element by element; a tangent that
is None on one side must be None on the other. Everything is float64, small and
seeded."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from leaks import release_levels
from torch import nn
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

DTYPE = torch.float64
APIS = [
    pytest.param(native_fwAD, id="native"),
    pytest.param(dual_fwAD, id="dualgen"),
]
aten = torch.ops.aten


# --------------------------------------------------------------------------------------
# helpers


def randn(*shape, requires_grad=False):
    return torch.randn(*shape, dtype=DTYPE, requires_grad=requires_grad)


def describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor(shape={list(value.shape)}, dtype={value.dtype})"
    return repr(value)


def assert_same(actual, expected, path="result"):
    """dualgen's `actual` equals the reference `expected` (native forward AD or
    torch.func), structurally and numerically; None only where the reference has
    None."""
    if actual is None or expected is None:
        assert actual is None and expected is None, (
            f"{path}: dualgen gives {describe(actual)}, "
            f"the reference gives {describe(expected)}"
        )
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {describe(actual)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape"
        # Values, whatever lazy conjugate or negative bit either carries; NaN
        # where the reference has NaN.
        assert_close(
            actual.detach().resolve_conj().resolve_neg(),
            expected.detach().resolve_conj().resolve_neg(),
            equal_nan=True,
            msg=lambda m: f"{path}: {m}",
        )
        return
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: {describe(actual)}"
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), path
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
        return
    assert actual == expected, f"{path}: dualgen {actual!r} != reference {expected!r}"


def run_both(fn, seed=0):
    """fn(fwAD) under native forward AD and under dualgen (same seed); compare."""
    torch.manual_seed(seed)
    expected = fn(native_fwAD)
    torch.manual_seed(seed)
    actual = fn(dual_fwAD)
    assert_same(actual, expected)
    return actual, expected


def unpack_all(fwAD, out):
    """Every tensor in `out` as (primal, tangent); other values as they are."""
    if isinstance(out, torch.Tensor):
        return tuple(fwAD.unpack_dual(out))
    if isinstance(out, (tuple, list)):
        return [unpack_all(fwAD, o) for o in out]
    return out


def jvp_of(f, *pairs):
    """fn(fwAD): f applied to make_dual(primal, tangent) (plain where tangent is
    None), outputs unpacked inside the level. Inputs are cloned for each run."""

    def fn(fwAD):
        with fwAD.dual_level():
            args = [
                p.clone() if t is None else fwAD.make_dual(p.clone(), t.clone())
                for p, t in pairs
            ]
            return unpack_all(fwAD, f(*args))

    return fn


def error_of(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - any error is the result here
        return exc
    pytest.fail("no exception raised")


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@pytest.fixture(autouse=True)
def no_level_left_behind():
    """Each test leaves no level active (native or dualgen) and no mode pushed."""
    yield
    leaked = release_levels()
    assert not leaked, f"left behind: {leaked}"


def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(DTYPE)


def nested_tangents(f, x, u, v):
    """Under two dualgen levels (x dual with v outside, u inside): the inner tangent
    of f(x), the outer tangent of f(x), and the outer tangent of the inner one."""
    with dual_fwAD.dual_level() as outer, dual_fwAD.dual_level() as inner:
        xi = dual_fwAD.make_dual(dual_fwAD.make_dual(x, v, level=outer), u)
        y = f(xi)
        t = dual_fwAD.unpack_dual(y, level=inner).tangent
        jv = dual_fwAD.unpack_dual(y, level=outer).tangent
        second = None if t is None else dual_fwAD.unpack_dual(t, level=outer).tangent
        return t, jv, second
