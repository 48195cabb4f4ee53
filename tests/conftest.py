import sys
from pathlib import Path

# Test helpers (kernel_harness, leaks, ...) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# CPU kernels for device-only ops (the CUDA attention kernels), so their rules run
# here: test-only references, never in the package.
import device_references  # noqa: F401


def pytest_report_header(config):
    import dualgen

    return f"dualgen kernel backend: {dualgen.kernel_backend()}"
