"""Every collective of duals on 2 and 4 ranks (gloo here; NCCL where a GPU per
rank exists) against the same computation in one process: collective_cases.py."""

from __future__ import annotations

import collective_cases
import pytest
from ranks import check_case, results_fixture

results = results_fixture("collective_cases")


@pytest.mark.parametrize("name", [case.__name__ for case in collective_cases.CASES])
def test_collective(results, name):
    check_case(results, name)
