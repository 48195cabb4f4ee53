"""Conformance with PyTorch's forward-AD tests: views, in-place ops, ops without
tangents or rules, out=, copy_ and vmap over duals.

From `TestAutogradForwardMode`, `TestAutogradForwardModeBatchedGrad`,
`TestAutograd.test_not_implemented_fwad` and the device-type `copy_` tests of
pytorch/pytorch `test/test_autograd.py` (and the forward-mode `jacobian` of
`test/autograd/test_functional.py`), in our own words. Programs run under native
PyTorch and dualgen through `conform`; see `tests/runtime/native_conformance_checks.py`.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest
import torch
from forward_ad_checks import assert_same
from native_conformance_checks import (
    F64,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    outcomes,
    rand,
)

# --------------------------------------------------------------------------------------
# 1. views and in-place ops


def test_inplace_on_a_dual_updates_its_tangent_but_not_the_primal_tensor():
    """`make_dual`'s result is a view of the primal that is not forward
    differentiable: `dual *= 2` scales the primal's memory and the tangent (the
    user's tensor, in place), but the primal tensor gets no tangent."""

    def program(api):
        foo, bar = rand(2), torch.ones(2, dtype=F64)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, bar)
            dual *= 2
            return (
                api.fwAD.unpack_dual(foo).tangent,
                foo,
                bar,
                tuple(api.fwAD.unpack_dual(dual)),
            )

    conform(program)


def test_inplace_on_the_unpacked_primal_or_tangent_writes_the_dual():
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(2), torch.ones(2, dtype=F64))
            primal, tangent = api.fwAD.unpack_dual(dual)
            no_tangents = (
                api.fwAD.unpack_dual(primal).tangent,
                api.fwAD.unpack_dual(tangent).tangent,
            )
            primal *= 2
            after_primal = tuple(api.fwAD.unpack_dual(dual))
            after_primal = (after_primal[0].clone(), after_primal[1].clone())
            tangent *= 3
            return no_tangents, after_primal, tuple(api.fwAD.unpack_dual(dual))

    conform(program)


def test_inplace_on_a_narrowed_dual_updates_the_tangent_of_its_base():
    def program(api):
        foo = rand(2)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, torch.ones(2, dtype=F64))
            view = dual.narrow(0, 0, 1)
            view *= 2
            return (
                api.fwAD.unpack_dual(foo).tangent,
                api.fwAD.unpack_dual(dual).tangent,
                api.fwAD.unpack_dual(view).tangent,
            )

    conform(program)


def test_plain_tensors_written_with_a_dual_get_a_tangent():
    """`baz += dual` gives baz the dual's tangent; `baz[0] = dual[0]` gives it a
    tangent that is 0 where nothing was written."""

    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(2), torch.tensor([2.0, 1.0], dtype=F64))
            added = rand(2)
            added += dual
            indexed = rand(2)
            indexed[0] = dual[0]
            return (
                tuple(api.fwAD.unpack_dual(added)),
                tuple(api.fwAD.unpack_dual(indexed)),
            )

    conform(program)


def test_writing_a_dual_into_a_detached_view_gives_the_base_no_tangent():
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(2), rand(2))
            base = rand(2)
            view = base.detach()
            view += dual
            return (
                api.fwAD.unpack_dual(base).tangent,
                tuple(api.fwAD.unpack_dual(view)),
            )

    conform(program)


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda v, d: v.add_(d), id="add_"),
        pytest.param(lambda v, d: v.mul_(d), id="mul_"),
        pytest.param(lambda v, d: v.copy_(d), id="copy_"),
    ],
)
def test_inplace_into_a_transposed_view_makes_base_and_view_tangents_views(op):
    """An in-place op writing a dual into a transposed view of a plain base gives
    the base a tangent whose relation to the view's tangent is the view: scaling the
    view afterwards scales the base's primal and tangent."""

    def program(api):
        base = torch.randn(2, 2, dtype=F64)
        view = base.transpose(0, 1)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(torch.randn(2, 2, dtype=F64), rand(2, 2))
            op(view, dual)
            primal, tangent = api.fwAD.unpack_dual(base)
            before = (primal.clone(), tangent.clone())
            view *= 2
            primal, tangent = api.fwAD.unpack_dual(base)
            return (
                torch.allclose(before[0] * 2, primal),
                torch.allclose(before[1] * 2, tangent),
                primal,
                tangent,
            )

    result = conform(program)
    assert result[:2] == (True, True)


def test_convolution_backward_leaves_an_unrequested_grad_input_undefined():
    """With output_mask (False, True, False) and a dual weight, the grad_input and
    grad_bias outputs of convolution_backward stay None; the op is still run."""

    def program(api):
        weight = torch.randn(6, 1, 5, 5, dtype=F64)
        inp = torch.rand(1, 1, 7, 7, dtype=F64)
        grad_out = torch.ones_like(torch.nn.functional.conv2d(inp, weight))
        with api.fwAD.dual_level():
            dual_weight = api.fwAD.make_dual(weight, torch.ones_like(weight))
            grad_input, grad_weight, grad_bias = torch.ops.aten.convolution_backward(
                grad_out,
                inp,
                dual_weight,
                (0,),
                (1, 1),
                (0, 0),
                (1, 1),
                False,
                (0, 0),
                1,
                (False, True, False),
            )
            return grad_input, grad_bias, tuple(api.fwAD.unpack_dual(grad_weight))

    conform(program)


# --------------------------------------------------------------------------------------
# 2. ops without tangents, out= variants


def test_comparisons_of_duals_run_and_give_no_tangent():
    def program(api):
        with api.fwAD.dual_level():
            foo = api.fwAD.make_dual(rand(2), rand(2))
            return tuple(api.fwAD.unpack_dual(foo == rand(2)))

    conform(program)


INPLACE_COMPARISONS = ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"]
LOGICAL = ["logical_and_", "logical_or_", "logical_xor_", "logical_not_"]


def _inplace_on_dual(op):
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(torch.rand(3, dtype=F64), rand(3)).clone()
            other = () if op == "logical_not_" else (torch.full((3,), 0.5, dtype=F64),)
            returned = getattr(dual, op)(*other)
            return (returned is dual,) + tuple(api.fwAD.unpack_dual(dual))

    return program


@pytest.mark.parametrize("op", INPLACE_COMPARISONS)
def test_inplace_comparison_on_a_dual_gives_a_zero_tangent(op):
    """The dual itself is returned, holding 0 or 1, with a zero tangent."""
    returned_self, _, tangent = conform(_inplace_on_dual(op))
    assert returned_self and not tangent.any()


@pytest.mark.parametrize("op", LOGICAL)
def test_inplace_logical_op_on_a_dual_gives_a_zero_tangent(op):
    """Native is wrong here: it runs the op and leaves the dual's old tangent in
    place (pinned below), though the result, 0 or 1, is piecewise constant. The
    reference is native's value and a zero tangent, as for the comparisons."""
    (native_ok, native), (dual_ok, dual) = outcomes(_inplace_on_dual(op))
    assert native_ok and native[2].any(), "native now updates the tangent: compare"
    if not dual_ok:
        raise dual
    returned_self, primal, tangent = dual
    assert_same(primal, native[1], "primal")
    assert returned_self and tangent is not None and not tangent.any()


@pytest.mark.parametrize("dual_is", ["out", "input"])
def test_out_variant_with_a_dual_raises(dual_is):
    def program(api):
        with api.fwAD.dual_level():
            foo = api.fwAD.make_dual(rand(2), rand(2))
            bar = rand(2)
            if dual_is == "out":
                torch.add(bar, bar, out=foo)
            else:
                torch.add(foo, bar, out=bar)

    conform(program, error=RuntimeError, match="out= function")


# --------------------------------------------------------------------------------------
# 3. TestAutogradForwardModeBatchedGrad: vmap over dual tensors


def _vmapped(fn, tangent):
    return torch._vmap_internals._vmap(fn, 0, 0)(tangent)


def test_vmapped_make_dual_copies_a_tangent_of_another_layout():
    def program(api):
        primal = torch.zeros(2, 2, dtype=F64).transpose(0, 1)
        tangents = torch.zeros(2, 2, 2, dtype=F64)

        def jvp(tangent):
            with api.fwAD.dual_level():
                return api.fwAD.unpack_dual(api.fwAD.make_dual(primal, tangent)).tangent

        out = _vmapped(jvp, tangents)
        return out is tangents, out

    assert conform(program)[0] is False


def _copy_into_view_under_vmap(api, view):
    tangents = torch.zeros(2, 2, 2, dtype=F64)

    def jvp(tangent):
        with api.fwAD.dual_level():
            x = api.fwAD.make_dual(torch.zeros(2, 2, dtype=F64), tangent)
            view.copy_(x)
            return (
                api.fwAD.unpack_dual(x).tangent,
                api.fwAD.unpack_dual(view).tangent,
                api.fwAD.unpack_dual(view._base).tangent,
            )

    x_tangent, view_tangent, base_tangent = _vmapped(jvp, tangents)
    return x_tangent is tangents, view_tangent, base_tangent


def test_vmapped_copy_into_a_same_layout_view_shares_the_base_tangent():
    """Differs on purpose: native gives the view the base's tangent tensor
    itself, which an in-place view op of the base then reshapes under the view
    (docs/differences.md); dualgen's is a view of it (the same memory)."""

    def program(api):
        base = torch.zeros(2, 2, dtype=F64)
        x_is, view_tangent, base_tangent = _copy_into_view_under_vmap(
            api, base.view_as(base)
        )
        shares = view_tangent is base_tangent or view_tangent._base is base_tangent
        return x_is, view_tangent is base_tangent, shares

    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert native_ok and native == (True, True, True)
    assert dual_ok and dual == (True, False, True)


def test_vmapped_copy_into_a_transposed_view_gives_a_view_of_the_base_tangent():
    def program(api):
        view = torch.zeros(2, 2, dtype=F64).transpose(0, 1)
        x_is, view_tangent, base_tangent = _copy_into_view_under_vmap(api, view)
        return x_is, view_tangent._base is base_tangent

    assert conform(program) == (True, True)


@pytest.mark.parametrize("view", ["same layout", "transposed", "broadcast"])
def test_copy_of_a_dual_into_a_view_of_a_plain_tensor(view):
    """Outside vmap: the base gets the tangent (as is where the view has the
    base's layout), the view's is a view of it exactly where native's is, and
    (on purpose) also where the view has the base's layout, where native's is
    the base's tangent itself (see the test after this one)."""

    def program(api):
        base = torch.zeros(2, 2, dtype=F64)
        target = {
            "same layout": base.view_as(base),
            "transposed": base.transpose(0, 1),
            "broadcast": base[0],
        }[view]
        with api.fwAD.dual_level():
            tangent = rand(*target.shape)
            x = api.fwAD.make_dual(rand(*target.shape), tangent)
            target.copy_(x)
            view_tangent = api.fwAD.unpack_dual(target).tangent
            base_tangent = api.fwAD.unpack_dual(base).tangent
            return (
                view_tangent._is_view() or view_tangent is base_tangent,
                view_tangent._base is base_tangent or view_tangent is base_tangent,
                base_tangent.data_ptr() == tangent.data_ptr(),
                view_tangent,
                base_tangent,
            )

    conform(program)


def test_a_base_s_in_place_view_op_keeps_the_shape_of_a_view_s_tangent():
    """Differs on purpose: native gives a view laid out like its base the base's
    tangent tensor itself, so the base's unsqueeze_ reshapes the view's tangent
    ([1, 3] for a [3] view); dualgen's view follows its own geometry."""

    def program(api):
        base = torch.zeros(3, dtype=F64)
        view = base[:]
        with api.fwAD.dual_level():
            view.copy_(api.fwAD.make_dual(rand(3), rand(3)))
            base.unsqueeze_(0)
            return tuple(api.fwAD.unpack_dual(view).tangent.shape)

    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert native_ok and native == (1, 3)  # native's wrong shape, pinned
    assert dual_ok and dual == (3,)


def test_vmapped_make_dual_skips_the_storage_size_check():
    """Under vmap the tangent is kept as given though the primal's storage is
    larger, so an as_strided view over the whole storage raises."""

    def program(api):
        primal = torch.randn(5, dtype=F64)[:4].detach()
        tangents = torch.randn(10, 4, dtype=F64)
        seen = []

        def jvp(tangent):
            with api.fwAD.dual_level():
                dual = api.fwAD.make_dual(primal, tangent)
                unpacked = api.fwAD.unpack_dual(dual).tangent
                seen.append(unpacked is tangent)
                try:
                    dual.as_strided((5,), (1,), 0)
                except RuntimeError as exc:
                    seen.append("can access memory outside of `tensor`" in str(exc))
            return unpacked

        _vmapped(jvp, tangents)
        return seen

    assert conform(program) == [True, True]


def test_vmap_over_a_dual_tensor_and_over_a_closure_holding_one():
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(torch.randn(4, 3, dtype=F64), rand(4, 3))
            mapped = torch.vmap(torch.sin)(dual)
            closed = torch.vmap(lambda row: row * dual[0])(torch.randn(2, 3, dtype=F64))
            return tuple(api.fwAD.unpack_dual(mapped)), tuple(
                api.fwAD.unpack_dual(closed)
            )

    conform(program)


def test_make_dual_under_torch_vmap_refuses_cleanly_or_works():
    """Native refuses ("Batching rule not implemented for aten::_make_dual"). dualgen
    passes if it refuses with a RuntimeError that says vmap or batching (today:
    "Cannot access storage of BatchedTensorImpl"), or if it computes the right
    tangents (those of torch.func.jvp under vmap)."""
    primal = torch.randn(3, dtype=F64)
    tangents = torch.eye(3, dtype=F64)

    def program(api):
        def jvp(tangent):
            with api.fwAD.dual_level():
                out = api.fwAD.make_dual(primal, tangent).sin()
                return api.fwAD.unpack_dual(out).tangent

        return torch.vmap(jvp)(tangents)

    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert not native_ok and "Batching rule not implemented" in str(native)
    if dual_ok:
        expected = torch.vmap(lambda t: torch.func.jvp(torch.sin, (primal,), (t,))[1])
        assert_same(dual, expected(tangents), "tangents")
    elif not (
        isinstance(dual, RuntimeError) and re.search("vmap|[Bb]atching", str(dual))
    ):
        raise dual


def test_jacobian_in_forward_mode_vectorized():
    """`torch.autograd.functional.jacobian` imports `forward_ad as fwAD`; the
    dualgen run swaps that one import."""

    def program(api):
        x, y = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
        with mock.patch.object(torch.autograd.functional, "fwAD", api.fwAD):
            return torch.autograd.functional.jacobian(
                lambda a, b: (a.sin() * b, a.sum() * b.exp()),
                (x, y),
                strategy="forward-mode",
                vectorize=True,
            )

    conform(program)


@pytest.mark.parametrize("arity", [1, 2])
def test_gradcheck_with_batched_forward_and_backward_checks(arity):
    def program(api):
        inputs = tuple(rand(4, 4).requires_grad_() for _ in range(arity))
        return api.gradcheck(
            torch.sin if arity == 1 else torch.add,
            inputs,
            check_forward_ad=True,
            check_batched_grad=True,
            check_batched_forward_grad=True,
        )

    assert conform(program) is True


# --------------------------------------------------------------------------------------
# 4. ops without a forward rule


def test_op_without_a_forward_rule_raises_not_implemented():
    def program(api):
        with api.fwAD.dual_level():
            x = api.fwAD.make_dual(torch.randn(3, dtype=F64), rand(3))
            torch.igamma(x, x)

    conform(
        program,
        error=NotImplementedError,
        match="Trying to use forward AD with .* that does not support it",
    )


# --------------------------------------------------------------------------------------
# 5. copy_ from a dual into a plain tensor


def test_copy_of_a_dual_broadcasts_into_a_larger_plain_tensor():
    def program(api):
        target = rand(1, 3, 3)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(3, 3), rand(3, 3))
            target.copy_(dual)
            return tuple(api.fwAD.unpack_dual(target))

    conform(program)


def test_copy_of_a_dual_of_the_same_layout_copies_the_tangent():
    def program(api):
        tangent = torch.tensor([[5.0], [6.0]], dtype=F64)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(torch.tensor([[3.0], [4.0]], dtype=F64), tangent)
            target = torch.tensor([[1.0], [2.0]], dtype=F64)
            target.copy_(dual)
            copied = api.fwAD.unpack_dual(target).tangent
            return copied is tangent, copied

    assert conform(program)[0] is False
