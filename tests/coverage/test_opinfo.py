"""The OpInfo conformance suite: every OpInfo that supports forward AD, every sample,
dualgen.forward_ad against native forward AD (tests/coverage/opinfo_sweep.py does the work),
and the same through the JVP programs of dualgen.fx.jvp;
and every OpInfo that supports forward-over-reverse, the Hessian-vector products
torch.autograd.grad gives from dual inputs (float64).

Pairs dualgen does not match are listed in tests/coverage/opinfo_known.py, by
mode, with the reason, as strict xfails: one that starts passing fails the suite
until it is taken off the list. Regenerate each mode's rows with
`python tests/coverage/opinfo_sweep.py --known` (`--fx --known`, `--hvp --known`).
"""

from __future__ import annotations

import pytest
import torch
from opinfo_known import KNOWN
from opinfo_sweep import check, dtypes_for, forward_ad_ops, hvp_dtypes_for, hvp_ops


def _cases(ops, dtypes_of, mode):
    for op in ops:
        for dtype in dtypes_of(op):
            key = (op.name, op.variant_test_name, str(dtype).removeprefix("torch."))
            marks = ()
            if (*key, mode) in KNOWN:
                marks = pytest.mark.xfail(strict=True, reason=KNOWN[(*key, mode)])
            yield pytest.param(op, dtype, id="-".join(k for k in key if k), marks=marks)


@pytest.mark.parametrize("op, dtype", list(_cases(forward_ad_ops(), dtypes_for, "jvp")))
def test_forward_ad_matches_native(op, dtype):
    _assert_matches(check(op, dtype), op, dtype)


@pytest.mark.parametrize("op, dtype", list(_cases(forward_ad_ops(), dtypes_for, "fx")))
def test_fx_jvp_program_matches_native(op, dtype):
    _assert_matches(check(op, dtype, fx=True), op, dtype)


@pytest.mark.parametrize("op, dtype", list(_cases(hvp_ops(), hvp_dtypes_for, "hvp")))
def test_forward_over_reverse_matches_native(op, dtype):
    _assert_matches(check(op, dtype, hvp=True), op, dtype)


def _assert_matches(result, op, dtype) -> None:
    assert result.status in ("pass", "n/a"), "\n".join(
        f"{kind}: {op.name} {dtype}: {detail}" for kind, detail in result.failures[:5]
    )


def test_dtypes_are_float64_and_complex128():
    assert {d for op in forward_ad_ops() for d in dtypes_for(op)} <= {
        torch.float64,
        torch.complex128,
    }
