"""The custom-op example library, examples/mylib (docs/custom_ops.md): its committed
kernel package is current with its spec, and `dualgen.load_kernels` makes its op
differentiable in forward mode (the JVP kernel) and on the tape (the VJP kernel),
under either kernel backend; both agree with finite differences.
"""

from __future__ import annotations

import sys

import pytest
import torch
from devices import DEVICE
from mylib_example import EXAMPLES, PACKAGE, SOFTCLIP, mylib
from torch.testing import assert_close

import dualgen
import dualgen.forward_ad as fwAD
from dualgen.harness.tape import Tape
from dualgen.hot_path import policy as hot_path
from dualgen.tools.cli import main


@pytest.fixture
def loaded():
    """The example's kernels loaded for the test, unloaded afterwards."""
    ops = dualgen.load_kernels(PACKAGE)
    yield ops
    dualgen.unload_kernels(PACKAGE)


def _finite_difference(f, x, v, h=1e-6):
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def test_the_committed_kernels_are_current(monkeypatch, capsys):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.setattr(sys, "path", list(sys.path))
    argv = ["generate", "--spec", "mylib/derivatives.yaml", "--out"]
    argv += ["mylib/_derivatives", "--import", "mylib.ops", "--check"]
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert out == "mylib/_derivatives is up to date (1 entries, 1 kernels)\n"


def test_the_package_has_python_kernels_only():
    files = {p.name for p in (EXAMPLES / "mylib" / "_derivatives").iterdir()}
    assert "cpp" not in files
    from mylib._derivatives.registry import KERNELS

    info = KERNELS[SOFTCLIP]
    assert (info.name, info.cpp_kernel) == ("mylib::softclip", None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("limit", [1.0, 2.5])
def test_forward_mode_tangent_is_the_derivative(loaded, backend, dtype, limit):
    assert loaded == (SOFTCLIP,)
    g = torch.Generator(DEVICE).manual_seed(0)
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    v = torch.randn(3, 4, generator=g, dtype=torch.float64)
    with fwAD.dual_level():
        out = mylib.softclip(fwAD.make_dual(x.to(dtype), v.to(dtype)), limit).sin()
        primal, tangent = fwAD.unpack_dual(out)
    assert tangent.dtype == dtype
    expected = _finite_difference(lambda y: mylib.softclip(y, limit).sin(), x, v)
    tol = 1e-5 if dtype == torch.float32 else 1e-7
    assert_close(tangent, expected.to(dtype), rtol=tol, atol=tol)
    assert_close(primal, mylib.softclip(x, limit).sin().to(dtype))


def test_the_op_runs_its_python_kernel_under_either_backend(loaded, backend):
    """The C++ hot path declines the op (its package has no C++ twin)."""
    x = torch.randn(3)
    with fwAD.dual_level():
        mylib.softclip(fwAD.make_dual(x, torch.ones(3)))
    assert hot_path.describe(SOFTCLIP) is None


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_the_tape_gradient_is_the_vjp(loaded, dtype):
    g = torch.Generator(DEVICE).manual_seed(1)
    x = torch.randn(5, generator=g, dtype=torch.float64).to(dtype)
    cotangent = torch.randn(5, generator=g, dtype=torch.float64).to(dtype)
    with Tape() as tape:
        tape.watch(x)
        y = mylib.softclip(x * 2, 1.5)
    (gx,) = tape.grad(y, x, cotangent)
    # The same function in aten ops, differentiated by autograd.
    xr = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(1.5 * torch.tanh(xr * 2 / 1.5), xr, cotangent)
    assert_close(gx, expected)


def test_the_vjp_matches_finite_differences():
    """<J^T u, v> = <u, J v>, with J v from finite differences."""
    g = torch.Generator(DEVICE).manual_seed(2)
    x, u, v = (torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(3))
    dualgen.load_kernels(PACKAGE)
    try:
        with Tape() as tape:
            tape.watch(x)
            y = mylib.softclip(x, 0.7)
        (gx,) = tape.grad(y, x, u)
    finally:
        dualgen.unload_kernels(PACKAGE)
    jv = _finite_difference(lambda z: mylib.softclip(z, 0.7), x, v)
    assert_close((gx * v).sum(), (u * jv).sum(), rtol=1e-7, atol=1e-9)
