"""Conformance with PyTorch's forward-AD tests: `unpack_dual`, printing, memory
sharing and detach. The named tuple and its fresh primal view, `str` of a dual,
shared storage and version counters of dual, primal and tangent, backward through
make_dual and unpack_dual, `detach` and `detach_` dropping the tangent (every
level too), `no_grad`, printing and `detach_` outside levels. Programs run under
native PyTorch and dualgen through `conform` (native_conformance_checks.py).
"""

from __future__ import annotations

import gc

import pytest
import torch
from native_conformance_checks import (
    F64,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    rand,
)

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 1. unpack_dual, printing, memory sharing, backward through packing


def test_unpack_dual_returns_a_named_tuple_and_a_fresh_primal_view():
    def program(api):
        with api.level_with_rand_dual(2) as (dual, foo, bar):
            first = api.fwAD.unpack_dual(dual)
            second = api.fwAD.unpack_dual(dual)
            plain = api.fwAD.unpack_dual(foo)
            return (
                type(first).__name__,
                first.primal is second.primal,
                first.primal,
                first.tangent is bar,
                second.tangent is bar,
                plain.primal,
                plain.tangent,
            )

    conform(program)


def test_str_of_a_dual_shows_tangent_and_nothing_else_does():
    def program(api):
        with api.fwAD.dual_level():
            plain = rand(3)
            dual = api.fwAD.make_dual(plain, rand(3))
            primal, tangent = api.fwAD.unpack_dual(dual)
            return ["tangent=" in str(t) for t in (plain, dual, primal, tangent)]

    assert conform(program) == [False, True, False, False]


def test_dual_primal_and_tangent_share_memory_and_version_counters():
    def program(api):
        foo, bar = rand(2), torch.ones(2, dtype=F64)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, bar)
            same_storage = dual.untyped_storage().data_ptr() == foo.data_ptr()
            foo.add_(1)
            versions = [foo._version == dual._version]
            primal, tangent = api.fwAD.unpack_dual(dual)
            aliases = (
                primal.data_ptr() == foo.data_ptr(),
                tangent.data_ptr() == bar.data_ptr(),
                tangent is bar,
            )
            foo.add_(1)
            versions.append(foo._version == primal._version)
            bar.add_(1)
            versions.append(bar._version == tangent._version)
            return same_storage, aliases, versions, dual

    conform(program)


def test_backward_through_make_dual_and_unpack_dual():
    def program(api):
        foo = rand(2).requires_grad_()
        bar = torch.ones(2, dtype=F64, requires_grad=True)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, bar)
            primal, tangent = api.fwAD.unpack_dual(dual)
            through_primal = torch.autograd.grad(
                primal.sum(), (foo, bar), retain_graph=True, allow_unused=True
            )
            through_tangent = torch.autograd.grad(
                tangent.sum(), (foo, bar), retain_graph=True, allow_unused=True
            )
            return through_primal, through_tangent

    conform(program)


def _detached(dual):
    return dual.detach() * 2


def _without_grad(dual):
    with torch.no_grad():
        return dual * 3


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(_detached, id="detach_drops_the_tangent"),
        pytest.param(
            _without_grad, id="no_grad_keeps_the_tangent_without_requires_grad"
        ),
    ],
)
def test_detach_and_no_grad(op):
    """op(dual) of a primal requiring grad: no requires_grad on what is unpacked,
    and a tangent only under no_grad (compared with native's)."""

    def program(api):
        foo = rand(2).requires_grad_()
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, rand(2))
            primal, tangent = api.fwAD.unpack_dual(op(dual))
            tangent_requires_grad = None if tangent is None else tangent.requires_grad
            return primal.requires_grad, tangent_requires_grad, primal, tangent

    conform(program)


def test_inplace_detach_drops_the_tangent():
    def program(api):
        foo = rand(2).requires_grad_()
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, rand(2)).clone()
            dual.detach_()
            kept = api.fwAD.unpack_dual(dual).tangent
            primal, tangent = api.fwAD.unpack_dual(dual * 2)
            return kept, primal.requires_grad, primal, tangent

    conform(program)


@pytest.mark.parametrize("call", ["method", "function"])
def test_inplace_detach_forgets_the_base_and_every_level(call):
    """torch.detach_ too; a view taken afterwards has no tangent; dualgen's
    nested levels are all dropped (native has one)."""

    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(2, 2), rand(2, 2)).clone()
            row = dual[0]
            if call == "method":
                row.detach().detach_()
                dual.detach_()
            else:
                torch.detach_(dual)
            return api.fwAD.unpack_dual(dual[1]).tangent, api.fwAD.unpack_dual(row)

    conform(program)
    with dual_fwAD.dual_level():
        x = dual_fwAD.make_dual(rand(2), rand(2))
        with dual_fwAD.dual_level():
            y = dual_fwAD.make_dual(x, rand(2)).sin()
            y.detach_()
            assert dual_fwAD.unpack_dual(y).tangent is None
        assert dual_fwAD.unpack_dual(y).tangent is None


def test_printing_and_detach_outside_levels_are_native():
    """The hooks for `detach_` and printing stay installed once a level was
    entered; outside levels they change nothing."""
    from dualgen import tensor_hooks

    with dual_fwAD.dual_level():
        with dual_fwAD.dual_level():
            x = dual_fwAD.make_dual(rand(2), rand(2))
            inner = str(x.sin())
        outer_level = str(x)  # x was dual at the inner level only
    assert "tangent=" in inner and "tangent=" not in outer_level
    y = rand(2).requires_grad_() * 2
    expected = tensor_hooks._ORIGINAL_STR_INTERN(y)
    assert str(y) == expected
    y.detach_()
    assert not y.requires_grad and y.grad_fn is None


def test_detach_does_not_keep_its_base_alive():
    def program(api):
        with api.fwAD.dual_level():
            foo = api.fwAD.make_dual(rand(2), rand(2))
            ref = torch._C._WeakTensorRef(foo)
            out = foo.detach()
            del foo
            gc.collect()
            return ref.expired(), out.shape

    assert conform(program)[0] is True
