"""Every kernel with tangents batched by legacy vmap (how the vectorized
forward-mode jacobians run them) gives each batch element the tangent that
element gives alone, or refuses with an error: never a wrong tangent (in-place
view ops of a batched tangent included). Which
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


def test_an_in_place_view_of_a_batched_tangent_is_each_elements_own():
    """Legacy vmap would leave the batched tangent's shape as it was (native's
    silent wrong tangent); dualgen gives self the view of its tangent taken out
    of place: each element's tangent is the one it gives alone."""
    from torch._vmap_internals import _vmap

    import dualgen.forward_ad as fwAD

    x = torch.randn(3, 1, 4, dtype=torch.float64)
    tangents = torch.randn(2, 3, 1, 4, dtype=torch.float64)

    def squeezed(t):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.clone(), t).squeeze_(1).t_()
            return fwAD.unpack_dual(dual).tangent

    batched = _vmap(squeezed)(tangents)
    assert batched.shape == (2, 4, 3)
    for element, tangent in zip(batched, tangents):
        torch.testing.assert_close(element, squeezed(tangent))
        torch.testing.assert_close(element, tangent.squeeze(1).t())
    assert fwAD._current_level == -1
