"""Conformance with PyTorch's forward-AD tests: forward grad mode and dual levels.
With forward grad disabled (`_set_fwd_grad_enabled(False)`) ops and make_dual give
no tangent, in-place ops leave the tangent as it was, and the API module's mode
helpers; tangents live inside their level and are gone after it, a new level does
not see the last one's, nesting (dualgen's extension), exiting a level whose
tangent has a backward graph. Programs run under native PyTorch and dualgen through
`conform` (native_conformance_checks.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from native_conformance_checks import (
    F64,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    rand,
)

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 1. forward grad mode (torch._C._set_fwd_grad_enabled)


def test_ops_under_disabled_forward_grad_give_no_tangent():
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(3), rand(3))
            with native_fwAD._set_fwd_grad_enabled(False):
                out = dual * 2
            return api.fwAD.unpack_dual(out).tangent, api.fwAD.unpack_dual(dual * 2)

    conform(program)


def test_make_dual_under_disabled_forward_grad_sets_no_tangent():
    def program(api):
        with api.fwAD.dual_level():
            with native_fwAD._set_fwd_grad_enabled(False):
                dual = api.fwAD.make_dual(rand(3), rand(3))
                inside = api.fwAD.unpack_dual(dual).tangent
            return inside, api.fwAD.unpack_dual(dual).tangent

    conform(program)


def test_a_level_entered_with_forward_grad_disabled_computes_no_tangents():
    def program(api):
        with native_fwAD._set_fwd_grad_enabled(False), api.fwAD.dual_level() as lvl:
            dual = api.fwAD.make_dual(rand(3), rand(3))
            return lvl, api.fwAD.unpack_dual(dual.sin()).tangent

    conform(program)


def test_disabled_forward_grad_stops_every_nested_level():
    """dualgen only (native cannot nest): with forward grad disabled, an op on a
    tensor dual at two levels gives it a tangent at neither, as native's single
    level does."""
    with dual_fwAD.dual_level():
        x = dual_fwAD.make_dual(rand(3), rand(3))
        with dual_fwAD.dual_level():
            x = dual_fwAD.make_dual(x, rand(3))
            with native_fwAD._set_fwd_grad_enabled(False):
                out = x.sin()
            inner = dual_fwAD.unpack_dual(out).tangent
            outer = dual_fwAD.unpack_dual(out, level=0).tangent
    assert (inner, outer) == (None, None)


def test_in_place_op_under_disabled_forward_grad_leaves_the_tangent_as_it_was():
    """Native leaves the tangent stale (the op's derivative is not applied); a
    view made meanwhile still follows its base's tangent once re-enabled."""

    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(3), rand(3)).clone()
            with native_fwAD._set_fwd_grad_enabled(False):
                dual.mul_(3)
                view = dual[1:]
                hidden = api.fwAD.unpack_dual(dual).tangent
            return (
                hidden,
                tuple(api.fwAD.unpack_dual(dual)),
                tuple(api.fwAD.unpack_dual(view)),
            )

    conform(program)


def test_forward_grad_mode_helpers_of_the_api_module():
    """PyTorch's tests toggle the mode through `fwAD._set_fwd_grad_enabled` and read
    it with `fwAD._is_fwd_grad_enabled`."""

    def program(api):
        states = [api.fwAD._is_fwd_grad_enabled()]
        with api.fwAD._set_fwd_grad_enabled(False):
            states.append(api.fwAD._is_fwd_grad_enabled())
            with api.fwAD._set_fwd_grad_enabled(True):
                states.append(api.fwAD._is_fwd_grad_enabled())
            states.append(api.fwAD._is_fwd_grad_enabled())
        return states + [api.fwAD._is_fwd_grad_enabled()]

    assert conform(program) == [True, False, True, False, True]


# --------------------------------------------------------------------------------------
# 2. levels


def test_tangent_is_the_given_one_inside_and_gone_after_the_level():
    def program(api):
        with api.level_with_rand_dual(2) as (dual, _, tangent):
            inside = api.fwAD.unpack_dual(dual)
        after = api.fwAD.unpack_dual(dual)
        return inside.primal, inside.tangent is tangent, tuple(after)

    conform(program)


def test_a_new_level_does_not_see_tangents_of_the_last_one():
    def program(api):
        with api.level_with_rand_dual(2) as (dual, foo, bar):
            baz = rand(2)
            first = (
                api.fwAD.unpack_dual(foo).tangent,
                api.fwAD.unpack_dual(dual).tangent is bar,
            )
        between = api.fwAD.unpack_dual(dual).tangent
        with api.fwAD.dual_level():
            untouched = api.fwAD.unpack_dual(foo).tangent
            new_dual = api.fwAD.make_dual(foo, baz)
            return (
                first,
                between,
                untouched,
                tuple(api.fwAD.unpack_dual(dual)),
                tuple(api.fwAD.unpack_dual(new_dual)),
            )

    conform(program)


def test_nested_levels_are_dualgens_extension():
    """Deliberate difference: native has one level and raises "Nested forward mode
    AD is not supported at the moment"; dualgen nests levels (0, then 1)."""
    with native_fwAD.dual_level() as level:
        assert level == 0
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not"):
            native_fwAD.enter_dual_level()
    with dual_fwAD.dual_level() as outer, dual_fwAD.dual_level() as inner:
        assert (outer, inner) == (0, 1)


def test_exiting_a_level_whose_tangent_has_a_backward_graph():
    """A tangent that requires grad feeds a backward graph (and exp saves its
    result): leaving the level must not hang or fail."""

    def program(api):
        with api.fwAD.dual_level():
            tangent = torch.rand(10, dtype=F64, requires_grad=True)
            dual = api.fwAD.make_dual(torch.rand_like(tangent), tangent)
            out = dual.exp()
            has = api.fwAD.unpack_dual(out).tangent.requires_grad
            del dual, out
        return has

    assert conform(program) is True
