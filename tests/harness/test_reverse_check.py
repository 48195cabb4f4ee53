"""reverse_over_forward_check: autograd's gradient of a tangent against central
differences (dualgen.harness.reverse_check), on a function whose tangent is right
and whose tangent's gradient is right, on one whose tangent's gradient is wrong,
and at a kink."""

from __future__ import annotations

import pytest
import torch

from dualgen.harness import GradcheckError, reverse_over_forward_check
from dualgen.harness.reverse_check import NotApplicable


def _x(*shape, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_a_right_gradient_passes(dtype):
    assert reverse_over_forward_check(
        lambda x: (x * x.sin()).exp(), (_x(3, 4, dtype=dtype),)
    )


def test_two_inputs_and_outputs_pass():
    def f(a, b):
        return torch.linalg.solve(a, b), torch.tanh(a @ b).sum(0)

    a = (_x(4, 4).detach() + 4 * torch.eye(4, dtype=torch.float64)).requires_grad_()
    assert reverse_over_forward_check(f, (a, _x(4, 2)))


def test_a_tangent_with_a_graph_that_misses_a_dependence_fails():
    # The tangent t * x is right, but it reads x through detach: autograd sees no
    # dependence of the tangent on x, central differences do.
    with pytest.raises(GradcheckError, match="Reverse over forward mismatch"):
        reverse_over_forward_check(lambda x: x * x.detach(), (_x(5),))


def test_a_jump_of_the_tangent_is_not_applicable():
    # relu's tangent jumps at 0: central differences grow as the step shrinks
    x = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotApplicable, match="not smooth"):
        reverse_over_forward_check(torch.relu, (x,))
