"""Taylor mode from the spec: `dualgen.jet(fun, primals, series)` propagates
truncated Taylor series through every op with a forward formula, by the rule the
generator read off the formula (generated/taylor.py). docs/taylor.md."""

from ..taylor_series import JetTensor
from . import arithmetic  # noqa: F401 (what JetTensor computes with)
from .api import jet

__all__ = ["JetTensor", "jet"]
