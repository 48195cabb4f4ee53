import sys
from pathlib import Path

import pytest
import torch

# Test helpers (kernel_harness, leaks, ...) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# CPU kernels for device-only ops (the CUDA attention kernels), so their rules run
# here: test-only references, never in the package.
import device_references  # noqa: F401
from devices import DEVICE, unavailable


def pytest_configure(config):
    """Off the CPU (DUALGEN_TEST_DEVICE), the device is torch's default for the
    session, set before any test module is imported; a device torch cannot use
    here stops the run before it starts."""
    if DEVICE.type == "cpu":
        return
    reason = unavailable(DEVICE)
    if reason is not None:
        raise pytest.UsageError(
            f"DUALGEN_TEST_DEVICE={DEVICE}: no such device here ({reason}); "
            "run on a machine that has one, or unset it for the CPU"
        )
    torch.set_default_device(DEVICE)


@pytest.fixture(scope="session")
def device() -> torch.device:
    """The device the suite runs on (DUALGEN_TEST_DEVICE, the CPU by default)."""
    return DEVICE


def pytest_report_header(config):
    import dualgen

    return [
        f"dualgen kernel backend: {dualgen.kernel_backend()}",
        f"dualgen test device: {DEVICE} (DUALGEN_TEST_DEVICE)",
    ]
