"""Choosing the kernels: DUALGEN_KERNELS, set_kernel_backend, kernel_backend; the
C++ hot path and the Python path agree, and errors name the op under both."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import dualgen
import dualgen.forward_ad as fwAD
from dualgen import cpp
from dualgen.hot_path import state as hot_path


@pytest.fixture
def backend():
    """Restores the backend the run started with."""
    before = dualgen.kernel_backend()
    yield
    dualgen.set_kernel_backend(before)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter; an environment variable given as None is
    left out."""
    merged = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env={k: v for k, v in merged.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_built_extension_is_the_default():
    out = _run("import dualgen; print(dualgen.kernel_backend())", DUALGEN_KERNELS=None)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("cpp" if cpp.state() == "built" else "python")


@pytest.mark.parametrize("name", ["cpp", "python"])
def test_the_environment_chooses(name):
    out = _run("import dualgen; print(dualgen.kernel_backend())", DUALGEN_KERNELS=name)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == name


def test_an_unknown_backend_is_refused(backend):
    with pytest.raises(ValueError, match="one of"):
        dualgen.set_kernel_backend("fortran")
    out = _run("import dualgen; dualgen.kernel_backend()", DUALGEN_KERNELS="rust")
    assert out.returncode != 0 and "DUALGEN_KERNELS must be one of" in out.stderr


def test_switching_inside_a_level_is_refused(backend):
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="exit every dual level"):
        dualgen.set_kernel_backend("python")


def test_each_backend_runs_its_kernels(backend):
    x, t = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    tangents = {}
    for name in ("cpp", "python"):
        dualgen.set_kernel_backend(name)
        assert dualgen.kernel_backend() == name
        assert (hot_path.dispatch is not None) == (name == "cpp")
        with fwAD.dual_level():
            y = (fwAD.make_dual(x, t).sin() * 3.0).exp()
            tangents[name] = fwAD.unpack_dual(y).tangent
    expected = t * x.cos() * 3.0 * (x.sin() * 3.0).exp()
    torch.testing.assert_close(tangents["cpp"], expected)
    torch.testing.assert_close(tangents["python"], tangents["cpp"], rtol=0, atol=0)


def test_user_rules_are_python_under_both(backend):
    calls = []

    def sin_jvp(self_p, self_t):
        calls.append(1)
        return self_t * 2

    dualgen.register_jvp(torch.ops.aten.sin.default)(sin_jvp)
    try:
        for name in ("cpp", "python"):
            dualgen.set_kernel_backend(name)
            with fwAD.dual_level():
                x = fwAD.make_dual(torch.ones(3), torch.ones(3))
                tangent = fwAD.unpack_dual(x.sin()).tangent
            assert torch.equal(tangent, torch.full((3,), 2.0)), name
    finally:
        dualgen.unregister_jvp(torch.ops.aten.sin.default)
    assert len(calls) == 2


@pytest.mark.parametrize("name", ["cpp", "python"])
def test_a_kernel_error_keeps_its_type_and_message_and_names_the_op(backend, name):
    """A formula that refuses its input (QR's derivative needs Q, which mode='r'
    does not compute) raises what the Python kernel raises under either backend,
    with a note naming the op and its entry; no level is left open."""
    dualgen.set_kernel_backend(name)
    with pytest.raises(RuntimeError) as info, fwAD.dual_level():
        a = fwAD.make_dual(torch.randn(4, 3), torch.randn(4, 3))
        torch.linalg.qr(a, mode="r")
    assert str(info.value).startswith("The derivative of linalg.qr depends on Q")
    note = "while computing the tangent of aten::linalg_qr (derivatives.yaml entry linalg_qr)"
    assert info.value.__notes__ == [note]
    assert not dualgen.levels.STATE.levels
