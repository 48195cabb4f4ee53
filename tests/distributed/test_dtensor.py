"""DTensor and tensor parallelism on 2 and 4 ranks against one process:
dtensor_cases.py."""

from __future__ import annotations

import dtensor_cases
import pytest
from ranks import run_cases

NAMES = [case.__name__ for case in dtensor_cases.CASES]


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def results(request):
    return request.param, run_cases("dtensor_cases", request.param)


@pytest.mark.parametrize("name", NAMES)
def test_dtensor(results, name):
    world_size, by_case = results
    outcome = by_case.get(name)
    assert outcome is not None, f"{name} did not run"
    assert len(outcome) == world_size, f"ranks that reported: {sorted(outcome)}"
    failures = {rank: error for rank, error in outcome.items() if error}
    assert not failures, "\n".join(f"rank {r}:\n{e}" for r, e in failures.items())
