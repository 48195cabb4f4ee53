"""Taylor mode from the spec: `dualgen.jet(fun, primals, series)` propagates
truncated Taylor series through every op with a forward formula, by the rule the
generator read off the formula (generated/taylor.py). docs/taylor.md."""

from . import arithmetic  # noqa: F401 (what JetTensor computes with)
from .api import jet
from .series import JetTensor

__all__ = ["JetTensor", "jet"]
