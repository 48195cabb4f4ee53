"""A short, fixed-seed run of the differential fuzzer (`make fuzz` runs it longer).

Random straight-line programs run under dualgen and native forward AD, nested ones
under two dualgen levels and nested torch.func.jvp; finite differences decide
where they part. A failure prints the shrunk program as a runnable reproducer;
keep it in test_regressions.py.
"""

from __future__ import annotations

from hypothesis import given, settings

from .generate import FUZZ_PROFILE, nested_programs, programs
from .judge import check, judge
from .nested import judge_nested

# Fixed examples (derandomize), no example database: the same programs every run.
SHORT_RUN = settings(FUZZ_PROFILE, derandomize=True)


@settings(SHORT_RUN, max_examples=400)
@given(programs())
def test_dualgen_agrees_with_native_up_to_its_known_defects(program):
    check(judge(program))


@settings(SHORT_RUN, max_examples=150)
@given(nested_programs())
def test_second_order_tangents_match_finite_differences(program):
    check(judge_nested(program))
