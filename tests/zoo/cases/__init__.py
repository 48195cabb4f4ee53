"""The zoo: common torch.nn modules and functional calls, with default settings.

Each case is a small function of a `Ctx` (`run.py`) returning `(f, args)`: `f`
is called on the arguments, with a tangent on every floating argument not
wrapped in `Const` (for `Ctx.with_params` cases, on the module's parameters as
well). Cases are grouped by family, one module of this package per family or two
(`common.py` holds the registry); `channels_last=True` adds a second case on
channels-last inputs and module. The modules are imported below in a fixed order,
which is the order of `CASES`.

PENDING_MERGE: aten op -> the cases that fail in dualgen only for want of that
op's rule, which other contributors are writing. Each is a strict xfail that must
fail with that op's "no rule" error; once the rule is merged the case passes, the
strict xfail reports XPASS, and the op's line here is to be dropped. A name
"case[float32]" limits an entry to one dtype.
EXPECTED_FAILURES: case -> the reason dualgen is known to get it wrong (strict
xfail; none at present).

    python -m tests.zoo.run CASE ...   # one case's verdicts
    python -m tests.zoo.table          # the Markdown table of all
"""

from __future__ import annotations

import importlib

from .common import ALL_DTYPES, CASES, Case, case

# The family modules, imported for their registrations in this order, which is
# the order of CASES (and so of the tests and the table).
FAMILY_MODULES = (
    "attention",
    "recurrent",
    "conv_norm",
    "pooling",
    "interpolation",
    "losses",
    "distributions",
    "linalg_fft",
    "misc",
)
for _m in FAMILY_MODULES:
    importlib.import_module(f".{_m}", __name__)
del _m

__all__ = [
    "ALL_DTYPES",
    "CASES",
    "EXPECTED_FAILURES",
    "FAMILY_MODULES",
    "PENDING_MERGE",
    "Case",
    "case",
]

# Ops whose rules other contributors are writing (see the module docstring); none
# at present: every rule the zoo waited for has been merged.
PENDING_MERGE: dict[str, list[str]] = {}

# case name -> reason (strict xfail in test_zoo.py; for both dtypes unless the
# key is "name[float32]" / "name[float64]").
EXPECTED_FAILURES: dict[str, str] = {}
