"""Forward-over-reverse where native PyTorch 2.13 fails (no forward rule for
native_dropout_backward; a wrongly sized one for masked_scatter_backward): the
tangent of the gradient equals central finite differences of the gradient."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE, fork_rng

import dualgen.forward_ad as fwAD

SEED = 11


def _seeded(f):
    def run(*xs):
        with fork_rng():
            torch.manual_seed(SEED)
            return f(*xs)

    return run


def _gradient(f, xs):
    leaves = [x.detach().clone().requires_grad_() for x in xs]
    out = f(*leaves)
    return torch.autograd.grad(out, leaves, torch.ones_like(out))


def _hvp(f, xs, vs):
    leaves = [x.detach().clone().requires_grad_() for x in xs]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, v) for x, v in zip(leaves, vs)]
        out = f(*duals)
        grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
        return [fwAD.unpack_dual(g).tangent for g in grads]


def _finite_differences(f, xs, vs, eps=1e-6):
    plus = _gradient(f, [x + eps * v for x, v in zip(xs, vs)])
    minus = _gradient(f, [x - eps * v for x, v in zip(xs, vs)])
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def _dropout(x):
    return (torch.ops.aten.native_dropout(x, 0.4, True)[0] * x.sin()).sum()


def _masked_scatter(x, source):
    mask = torch.arange(20).reshape(4, 5) % 3 == 0
    return (x.masked_scatter(mask, source) ** 2 * source[:3].sum()).sum()


@pytest.mark.parametrize(
    "f, shapes",
    [(_dropout, [(4, 5)]), (_masked_scatter, [(4, 5), (9,)])],
    ids=["native_dropout", "masked_scatter"],
)
def test_hvp_equals_finite_differences_of_the_gradient(f, shapes):
    gen = torch.Generator(DEVICE).manual_seed(0)
    xs = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    vs = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    f = _seeded(f)
    got = _hvp(f, xs, vs)
    expected = _finite_differences(f, xs, vs)
    for g, e in zip(got, expected):
        assert g is not None
        torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-6)
    assert any(e.abs().max() > 0.1 for e in expected)  # not trivially zero


@pytest.mark.parametrize("explicit_generator", [False, True])
def test_random_op_recomputed_for_autograd_draws_once(explicit_generator):
    # With a tracked input the mode recomputes ops whose formula reads their
    # output; a random op must draw the same mask both times, and leave the
    # stream where one call leaves it.
    x = torch.randn(50, dtype=torch.float64, requires_grad=True)

    def draws(dual: bool):
        generator = (
            torch.Generator(DEVICE).manual_seed(3) if explicit_generator else None
        )
        torch.manual_seed(SEED)
        with fwAD.dual_level():
            inp = fwAD.make_dual(x, torch.ones_like(x)) if dual else x
            out = torch.bernoulli(torch.full_like(x, 0.5), generator=generator)
            y, mask = torch.ops.aten.native_dropout(inp, 0.5, True)
            tangent = fwAD.unpack_dual(y).tangent
        after = (generator or torch.default_generator).get_state()
        return out, y.detach(), mask, tangent, after

    plain, dual = draws(False), draws(True)
    for a, b in zip(plain[:3], dual[:3]):
        assert torch.equal(a, b)
    # The tangent of dropout is the tangent where the primal's mask keeps.
    torch.testing.assert_close(dual[3], dual[2] * 2.0, check_dtype=False)
    assert torch.equal(plain[4], dual[4])
