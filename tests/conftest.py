import sys
from pathlib import Path

# Test helpers (samples, harness) are plain modules beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
