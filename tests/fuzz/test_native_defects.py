"""Each registered native defect still reproduces on native, and dualgen gets its
reproducer right (or, for a defect dualgen shares on purpose, exactly as wrong):
when PyTorch fixes one, this says so, and the registry entry goes."""

from __future__ import annotations

import pytest

from .interpret import NATIVE, run
from .judge import judge
from .native_defects import DEFECTS
from .nested import judge_nested
from .program import NestedProgram, Program


@pytest.mark.parametrize("defect", DEFECTS, ids=lambda d: d.name)
def test_reproducer_shows_the_defect(defect):
    if defect.nested is not None:
        # torch.func's: it differs from finite differences, dualgen does not.
        verdict = judge_nested(NestedProgram.from_code(defect.reproducer))
        assert verdict.outcome == defect.name, verdict.report()
        assert verdict.finding.culprit == "torch.func", verdict.report()
        assert verdict.finding.variable == defect.variable, verdict.report()
        return
    program = Program.from_code(defect.reproducer)
    # A plain function of its leaves: finite differences apply, so no entry about
    # values rests on native's word alone.
    assert program.finite_differences_apply
    verdict = judge(program)
    assert verdict.outcome == defect.name, verdict.report()
    finding = verdict.finding
    assert finding.variable == defect.variable, verdict.report()
    if defect.dtype_only:
        # Only the dtype differs: native's tangent has another dtype than the
        # value it belongs to (complex for real, real for complex, float64 for
        # float32), dualgen's has the value's kind.
        assert finding.aspect == "tangent dtype", verdict.report()
        native = run(program, NATIVE).states[finding.step][finding.variable]
        assert native.tangent.dtype != native.value.dtype
        return
    expected = "both" if defect.shared else "native"
    assert finding.culprit == expected, verdict.report()
