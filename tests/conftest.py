import sys
from pathlib import Path

# Test helpers (kernel_harness, leaks, ...) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


def pytest_report_header(config):
    import dualgen

    return f"dualgen kernel backend: {dualgen.kernel_backend()}"
