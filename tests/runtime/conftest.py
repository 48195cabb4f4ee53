"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import pytest
import torch

import dualgen
import dualgen.forward_ad as fwAD


@pytest.fixture(params=["cpp", "python"])
def backend(request):
    """Each kernel backend in turn (cpp where the extension is built)."""
    before = dualgen.kernel_backend()
    try:
        dualgen.set_kernel_backend(request.param)
    except (FileNotFoundError, RuntimeError) as exc:  # not built, or stale
        pytest.skip(f"no C++ kernels: {exc}")
    yield request.param
    dualgen.set_kernel_backend(before)


@pytest.fixture
def on_the_cpu():
    """The CPU as torch's default device whatever the suite's (DEVICE): the tests
    that prove device-only rules through the CPU references
    (tests/device_references/) run there."""
    with torch.device("cpu"):
        yield


@pytest.fixture(scope="module")
def cpp_kernels_for_module():
    """The C++ backend for a whole module, its rules registered (the backend
    registers them on first use), the previous backend restored after."""
    before = dualgen.kernel_backend()
    dualgen.set_kernel_backend("cpp")
    with fwAD.dual_level():
        pass
    yield
    dualgen.set_kernel_backend(before)


@pytest.fixture
def registered():
    """Append the Functions and ops the test gives a jvp rule to (register_jvp):
    their rules are unregistered after it."""
    targets = []
    yield targets
    for target in targets:
        dualgen.unregister_jvp(target)
