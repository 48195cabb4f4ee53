"""When values and tangents arrive, and duals sent in their own memory, on 2 and
4 ranks against one process: completion_cases.py."""

from __future__ import annotations

import completion_cases
import pytest
from ranks import check_case, results_fixture

results = results_fixture("completion_cases")


@pytest.mark.parametrize("name", [case.__name__ for case in completion_cases.CASES])
def test_completion(results, name):
    check_case(results, name)
