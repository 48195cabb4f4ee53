"""DTensor, tensor parallelism and data-parallel wrappers on 2 and 4 ranks
against one process: dtensor_cases.py."""

from __future__ import annotations

import dtensor_cases
import pytest
from ranks import check_case, results_fixture

results = results_fixture("dtensor_cases")


@pytest.mark.parametrize("name", [case.__name__ for case in dtensor_cases.CASES])
def test_dtensor(results, name):
    check_case(results, name)
