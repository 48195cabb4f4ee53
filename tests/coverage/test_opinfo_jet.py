"""dualgen.jet at order 3 along a general curve for every OpInfo that supports
forward AD (float64 and complex128), against dualgen's nested levels
(tests/coverage/opinfo_jet.py does the work). Rows that do not pass are listed in
KNOWN_JET with the reason, as strict xfails; a test below shows the sweep fails
on a wrong Taylor rule."""

from __future__ import annotations

import pytest
import torch
from opinfo_jet import MODE, cases
from opinfo_nested import check

import dualgen.taylor.table as taylor_table
from dualgen.taylor.rules import Linear

KNOWN_JET = {
    # Every input is at a kink (the samples are zeros): nothing to judge.
    ("linalg.norm", "subgradients_at_zero", "float64"): "unjudged: inputs at a kink",
    ("linalg.norm", "subgradients_at_zero", "complex128"): "unjudged: inputs at a kink",
}


def _params():
    for op, dtype in cases():
        key = (op.name, op.variant_test_name, str(dtype).removeprefix("torch."))
        marks = ()
        if key in KNOWN_JET:
            marks = pytest.mark.xfail(strict=True, reason=KNOWN_JET[key])
        yield pytest.param(op, dtype, id="-".join(k for k in key if k), marks=marks)


@pytest.mark.parametrize("op, dtype", list(_params()))
def test_jet_order3(op, dtype):
    result = check(op, dtype, MODE, samples=1)
    assert result.status in ("pass", "n/a"), "\n".join(
        [f"{result.status}: {op.name} {dtype} ({result.unjudged} unjudged)"]
        + [f"{kind}: {detail}" for kind, detail in result.failures[:3]]
        + result.notes[:3]
    )


def test_a_wrong_taylor_rule_is_caught(monkeypatch):
    """exp taken for linear: first order stays right, orders 2 and 3 are not."""
    from torch.testing._internal.common_methods_invocations import op_db

    exp = next(op for op in op_db if op.name == "exp" and not op.variant_test_name)
    monkeypatch.setitem(taylor_table._table(), torch.ops.aten.exp.default, Linear())
    result = check(exp, torch.float64, MODE, samples=1)
    assert result.status == "wrong" and "y2" in result.failures[0][1]
