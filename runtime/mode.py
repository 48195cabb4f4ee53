"""The dispatch mode's former path: it is `dualgen.dispatch.mode` now. Kept for
code that imports `DualMode` or `call_with` from here (tests/spec does)."""

from .dispatch.inplace import call_with
from .dispatch.mode import DualMode

__all__ = ["DualMode", "call_with"]
