"""Every kernel with tangents batched by legacy vmap (how the vectorized
forward-mode jacobians run them) gives each batch element the tangent that
element gives alone, or refuses with an error: never a wrong tangent. Which
kernels loop over the batch is reported by `python -m tests.kernels.batched_survey`
(docs/api.md), not asserted: that is legacy vmap's coverage, not correctness."""

from __future__ import annotations

import pytest
import torch
from batched_survey import _first_cases, survey_one


@pytest.mark.parametrize("kernel_case", list(_first_cases()), ids=lambda c: c.info.name)
def test_batched_tangents_are_each_elements_own(kernel_case):
    outcome = survey_one(kernel_case)
    if outcome is None:
        pytest.skip("no input of the first sample takes a tangent")
    assert outcome.wrong is None, f"{outcome.kernel}: {outcome.wrong}"
    if outcome.refusal is not None:
        assert outcome.refusal.startswith("RuntimeError"), outcome.refusal


def test_an_in_place_view_of_a_batched_tangent_is_refused():
    """Legacy vmap would leave the batched tangent's shape as it was (native's
    silent wrong tangent); dualgen says so and what to do instead."""
    from torch._vmap_internals import _vmap

    import dualgen.forward_ad as fwAD

    x = torch.randn(3, 1, 4, dtype=torch.float64)

    def squeezed(t):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(x.clone(), t).squeeze_(1)).tangent

    with pytest.raises(RuntimeError, match=r"aten::squeeze_.dim .*x = x.squeeze\("):
        _vmap(squeezed)(torch.randn(2, 3, 1, 4, dtype=torch.float64))
    assert fwAD._current_level == -1
