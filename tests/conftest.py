import sys
from pathlib import Path

# Test helpers (kernel_harness, leaks, ...) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
