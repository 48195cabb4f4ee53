"""What the tests of dualgen.formulas (tests/test_formulas_*.py) share: the dtypes
they run in, and the references they compare the helpers with (torch's own autograd
and forward AD)."""

from __future__ import annotations

import torch

R, C = torch.float64, torch.complex128
DTYPES = [R, C]


def close(actual, expected, **kw):
    torch.testing.assert_close(actual, expected, **kw)


def vjp(fn, inputs, grad):
    """torch.autograd.grad of fn at `inputs` (zeros for an input it does not use)."""
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    return torch.autograd.grad(out, inputs, grad, materialize_grads=True)


def jvp(fn, primals, tangents):
    return torch.func.jvp(fn, tuple(primals), tuple(tangents))[1]
