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


def pytest_addoption(parser):
    parser.addoption(
        "--without-backend-pairs",
        action="store_true",
        help="leave out the tests that run each kernel backend in turn (the `backend` "
        "fixture): for the second pass with DUALGEN_KERNELS=python, after a first pass "
        "that ran them with both",
    )


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--without-backend-pairs"):
        return
    paired = [item for item in items if "backend" in getattr(item, "fixturenames", ())]
    if paired:
        config.hook.pytest_deselected(items=paired)
        items[:] = [
            item for item in items if "backend" not in getattr(item, "fixturenames", ())
        ]


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
