"""The zoo (`cases/`): every case, float32 and float64, under dualgen.forward_ad.

A case passes when dualgen runs and its tangents agree with native forward AD
(torch.autograd.forward_ad, torch.func.jvp) where native works, and with central
finite differences in float64 (`run.py`). A case that fails is a failing test,
unless `cases/` lists it: EXPECTED_FAILURES (strict xfail, with the reason) or
PENDING_MERGE (strict xfail until the rule of that op is merged; it must fail for
want of that op's rule, any other failure fails the test).
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

from .cases import CASES, EXPECTED_FAILURES, PENDING_MERGE
from .run import run_case, run_fd

# torch's own notices (grid_sample's align_corners default, LSTM projections and
# oneDNN, nested tensors), not the zoo's concern.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class PendingRule(Exception):
    """dualgen has no rule (yet) for an op another contributor is writing."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def pending_ops(name: str, dtype: torch.dtype) -> list[str]:
    """The pending ops a case waits for in that dtype (none: [])."""
    keys = (name, f"{name}[{_dtype_name(dtype)}]")
    return [op for op, cases in PENDING_MERGE.items() if any(k in cases for k in keys)]


def expected_failure(name: str, dtype: torch.dtype) -> str | None:
    for key in (name, f"{name}[{_dtype_name(dtype)}]"):
        if key in EXPECTED_FAILURES:
            return EXPECTED_FAILURES[key]
    return None


def _params():
    for name, case in CASES.items():
        for dtype in case.dtypes:
            marks = []
            ops = pending_ops(name, dtype)
            reason = expected_failure(name, dtype)
            if ops:
                why = "pending merge of the rules for " + ", ".join(
                    f"aten::{op}" for op in ops
                )
                marks.append(
                    pytest.mark.xfail(strict=True, raises=PendingRule, reason=why)
                )
            elif reason is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(
                name, dtype, id=f"{name}-{_dtype_name(dtype)}", marks=marks
            )


def test_pending_and_expected_name_cases():
    names = set(CASES)
    keys = [k for cases in PENDING_MERGE.values() for k in cases] + list(
        EXPECTED_FAILURES
    )
    unknown = [k for k in keys if re.sub(r"\[float(32|64)\]$", "", k) not in names]
    assert not unknown, f"no such zoo cases: {unknown}"


@functools.cache
def _finite_differences(name: str):
    """Float64 finite differences, shared by a case's dtypes."""
    return run_fd(CASES[name])


@pytest.mark.parametrize("name, dtype", list(_params()))
def test_zoo(name, dtype):
    case = CASES[name]
    v = run_case(case, dtype, None if case.no_fd else _finite_differences(name))
    if not v.dualgen_ok:
        # Only the missing rule of a pending op is the expected failure.
        for op in pending_ops(name, dtype):
            if re.search(rf"forward AD with {re.escape(op)} that", v.dualgen):
                raise PendingRule(v.dualgen)
    assert v.dualgen_ok, (
        f"{name} [{_dtype_name(dtype)}]: dualgen: {v.dualgen} (compared with: "
        f"{v.reference or 'nothing'}); native forward_ad: {v.native}; "
        f"torch.func.jvp: {v.func_jvp}; notes: {v.notes}"
    )
