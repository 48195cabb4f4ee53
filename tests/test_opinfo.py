"""The OpInfo conformance suite: every OpInfo that supports forward AD, every sample,
dualgen.forward_ad against native forward AD (tests/opinfo_sweep.py does the work).

Ops dualgen does not cover yet are listed in tests/opinfo_known.py with the reason,
as strict xfails: one that starts passing fails the suite until it is taken off
the list. Regenerate the list with `python tests/opinfo_sweep.py --known`.
"""

from __future__ import annotations

import pytest
import torch
from opinfo_known import KNOWN
from opinfo_sweep import check, dtypes_for, forward_ad_ops


def _cases():
    for op in forward_ad_ops():
        for dtype in dtypes_for(op):
            key = (op.name, op.variant_test_name, str(dtype).removeprefix("torch."))
            marks = ()
            if key in KNOWN:
                marks = pytest.mark.xfail(strict=True, reason=KNOWN[key])
            yield pytest.param(op, dtype, id="-".join(k for k in key if k), marks=marks)


@pytest.mark.parametrize("op, dtype", list(_cases()))
def test_forward_ad_matches_native(op, dtype):
    result = check(op, dtype)
    assert result.status in ("pass", "n/a"), "\n".join(
        f"{kind}: {op.name} {dtype}: {detail}" for kind, detail in result.failures[:5]
    )


def test_dtypes_are_float64_and_complex128():
    assert {d for op in forward_ad_ops() for d in dtypes_for(op)} <= {
        torch.float64,
        torch.complex128,
    }
