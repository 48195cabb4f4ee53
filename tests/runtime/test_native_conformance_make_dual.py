"""Conformance with PyTorch's forward-AD tests: `make_dual`. Which tangent is kept
(the given one, a copy for a primal over a larger storage, a diagonal for zero
strides, only when its conj and neg bits are the primal's), its checks on its
arguments (size, integral dtypes, a tangent dual at the same level), inference
mode, and tensor subclasses with __torch_dispatch__ (aliasing only the primal,
re-entering dispatch). Programs run under native PyTorch and dualgen through
`conform` (native_conformance_checks.py).
"""

from __future__ import annotations

import gc

import pytest
import torch
from native_conformance_checks import (
    C128,
    F64,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    rand,
)
from torch.utils._mode_utils import no_dispatch

# --------------------------------------------------------------------------------------
# 1. make_dual: which tangent is kept, checks on its arguments


def test_given_tangent_is_kept_alive_by_the_dual_and_freed_with_it():
    def program(api):
        primal = rand(2)
        with api.fwAD.dual_level():
            tangent = rand(2)
            ref = torch._C._WeakTensorRef(tangent)
            dual = api.fwAD.make_dual(primal, tangent)
            kept_as_is = api.fwAD.unpack_dual(dual).tangent is tangent
            del tangent
            alive_with_dual = not ref.expired()
            del dual
            gc.collect()
            return kept_as_is, alive_with_dual, ref.expired()

    assert conform(program) == (True, True, True)


def _of_another_size(api):
    tangent = rand(3)
    api.fwAD.make_dual(rand(2), tangent[1:])  # a slice of the right size: accepted
    return tangent


def _dual_at_the_same_level(api):
    return api.fwAD.make_dual(rand(2), rand(2))


@pytest.mark.parametrize(
    "tangent, match",
    [
        pytest.param(
            _of_another_size,
            "Trying to set a forward gradient that has a different size",
            id="of_another_size",
        ),
        pytest.param(
            _dual_at_the_same_level,
            "has a forward gradient at the same level",
            id="dual_at_the_same_level",
        ),
    ],
)
def test_make_dual_rejects_a_tangent(tangent, match):
    """tangent(api), inside the level: the tangent make_dual must refuse."""

    def program(api):
        with api.fwAD.dual_level():
            api.fwAD.make_dual(rand(2), tangent(api))

    conform(program, error=RuntimeError, match=match)


def test_primal_over_a_larger_storage_gets_a_copied_tangent():
    """The primal is 4 elements of a 5-element storage: the tangent is copied into
    a same-sized storage, so writing it leaves the user's tangent alone and an
    as_strided view over the whole storage works."""

    def program(api):
        primal = torch.randn(5, dtype=F64)[:4].detach()
        tangent = torch.randn(4, dtype=F64)
        before = tangent.clone()
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            unpacked = api.fwAD.unpack_dual(dual).tangent
            unpacked *= 2
            whole = dual.as_strided((5,), (1,), 0)
            return (
                unpacked is tangent,
                torch.equal(tangent, before),
                tuple(api.fwAD.unpack_dual(whole)),
            )

    conform(program)


def test_zero_size_dual_with_a_zero_stride_tangent_takes_a_diagonal():
    def program(api):
        primal = torch.ones(0, dtype=F64).as_strided((0, 1), (1, 1), 0)
        tangent = torch.ones(0, dtype=F64).as_strided((0, 1), (1, 0), 0)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            return tuple(api.fwAD.unpack_dual(torch.diagonal(dual, offset=0)))

    conform(program)


def test_gradcheck_forward_of_the_diagonal_of_an_empty_complex_input():
    def program(api):
        x = torch.rand(0, 1, dtype=C128, requires_grad=True)
        return api.gradcheck(lambda t: torch.diagonal(t), (x,), check_forward_ad=True)

    assert conform(program) is True


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.randn(2, 2, dtype=C128).conj(), id="conj"),
        pytest.param(lambda: torch.randn(2, 2, dtype=C128).conj().imag, id="neg"),
    ],
)
def test_slicing_a_dual_whose_primal_has_a_lazy_bit(make):
    def program(api):
        primal = make()
        tangent = torch.rand(primal.shape, dtype=primal.dtype)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            return tuple(api.fwAD.unpack_dual(dual[1:]))

    conform(program)


BITS = {
    "plain": lambda x: x,
    "conj": lambda x: x.conj(),
    "neg": lambda x: x._neg_view(),
}


@pytest.mark.parametrize("tangent_bit", BITS)
@pytest.mark.parametrize("primal_bit", BITS)
def test_tangent_is_reused_only_when_its_conj_and_neg_bits_are_the_primals(
    primal_bit, tangent_bit
):
    def program(api):
        primal = BITS[primal_bit](torch.randn(2, 3, dtype=C128))
        tangent = BITS[tangent_bit](torch.randn(2, 3, dtype=C128))
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            kept = api.fwAD.unpack_dual(dual).tangent
            return (
                kept is tangent,
                kept.is_conj(),
                kept.is_neg(),
                kept,
                api.fwAD.unpack_dual(torch.real(dual)).tangent,
                api.fwAD.unpack_dual(torch.imag(dual)).tangent,
            )

    reused = conform(program)[0]
    assert reused == (primal_bit == tangent_bit)


# name: the (size, stride, storage offset) of primal and tangent, each a view of a
# one-element tensor of its own
OTHER_LAYOUTS = {
    "zero_numel_at_another_storage_offset": (((0,), (1,), 1), ((0,), (1,), 2)),
    "one_element_with_other_strides": (((1,), (2,), 0), ((1,), (1,), 0)),
}


@pytest.mark.parametrize("case", OTHER_LAYOUTS)
def test_tangent_laid_out_otherwise_is_reused_and_slices(case):
    """The layouts differ only where there is no element: the tangent is reused as
    it is, and the dual's empty slice has an empty tangent."""

    def program(api):
        primal, tangent = (
            torch.tensor([1.0], dtype=F64).as_strided(*layout)
            for layout in OTHER_LAYOUTS[case]
        )
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            reused = api.fwAD.unpack_dual(dual).tangent is tangent
            return reused, tuple(api.fwAD.unpack_dual(dual[1:]))

    assert conform(program)[0] is True


@pytest.mark.parametrize(
    "primal_dtype, tangent_dtype, match",
    [
        (F64, torch.long, "Expected tangent to be floating point or complex"),
        (torch.long, torch.long, "Expected primal to be floating point or complex"),
        (torch.long, F64, "Expected primal to be floating point or complex"),
    ],
)
def test_make_dual_rejects_integral_dtypes(primal_dtype, tangent_dtype, match):
    def program(api):
        with api.fwAD.dual_level():
            api.fwAD.make_dual(
                torch.ones(2, 2, dtype=primal_dtype),
                torch.ones(2, 2, dtype=tangent_dtype),
            )

    conform(program, error=ValueError, match=match)


def test_make_dual_of_an_inference_tensor_in_inference_mode():
    """In inference mode the dual is no view, and an in-place op on it writes the
    primal's memory."""

    def program(api):
        with torch.inference_mode():
            primal, tangent = rand(2), rand(2)
            before = primal.clone()
            with api.fwAD.dual_level():
                dual = api.fwAD.make_dual(primal, tangent)
                is_view = dual._is_view()
                dual += 1
                return is_view, torch.equal(primal, before + 1)

    assert conform(program) == (False, True)


class AliasCounter(torch.Tensor):
    """A subclass whose __torch_dispatch__ counts `aten.alias` calls and runs a
    small autograd computation (re-entering dispatch) while doing so."""

    calls = 0

    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func.overloadpacket == torch.ops.aten.alias:
            AliasCounter.calls += 1
            with torch.overrides.enable_reentrant_dispatch():
                probe = torch.rand(1, requires_grad=True)
                assert probe.exp().grad_fn is not None
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def test_make_dual_of_a_dispatch_subclass_aliases_only_the_primal():
    def program(api):
        AliasCounter.calls = 0
        sub = AliasCounter(torch.tensor(1.0))
        with api.fwAD.dual_level():
            api.fwAD.make_dual(sub, torch.rand_like(sub))
            after_primal = AliasCounter.calls
            api.fwAD.make_dual(torch.rand_like(sub), sub)
            return after_primal, AliasCounter.calls

    assert conform(program) == (1, 1)


class Rewrapping(torch.Tensor):
    """A subclass whose __torch_dispatch__ re-enters dispatch (with autograd) on
    every op and wraps what the op returns."""

    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        with torch.overrides.enable_reentrant_dispatch():
            probe = torch.rand(1, requires_grad=True)
            assert probe.exp().grad_fn is not None
        with no_dispatch():
            out = func(*args, **(kwargs or {}))
        return torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda t: t if isinstance(t, cls) else cls(t), out
        )


def test_a_dual_dispatch_subclass_that_re_enters_dispatch():
    """Its ops run with dualgen's mode on the stack, so re-entered ops reach a
    mode; tangents, views, in-place ops and types are native's."""

    def program(api):
        x = Rewrapping(rand(3))
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(x, rand(3))
            y = dual.sin() * dual
            y[1:].add_(dual[:2])
            primal, tangent = api.fwAD.unpack_dual(y)
            types = [type(t).__name__ for t in (dual, y, primal, tangent)]
            plain = lambda t: t.as_subclass(torch.Tensor).clone()
            return types, plain(primal), plain(tangent)

    conform(program)


class Logged(torch.Tensor):
    """A subclass with a __torch_function__ of its own (no dispatch): make_dual
    goes through it, so the dual keeps the subclass."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("kind", ["parameter", "parameter requiring grad", "logged"])
def test_make_dual_of_a_parameter_or_a_torch_function_subclass(kind):
    """A Parameter (which dispatches plainly and has no torch function) gives a
    plain Tensor dual, a view in autograd's graph when it requires grad; a
    subclass with a torch function of its own keeps its type. Tangents of an
    op on the dual and the gradient through it are native's."""

    def program(api):
        data = rand(3)
        if kind == "logged":
            primal = data.as_subclass(Logged)
        else:
            primal = torch.nn.Parameter(data, requires_grad=kind.endswith("grad"))
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, rand(3))
            y = (dual.tanh() * dual).sum()
            tangent = api.fwAD.unpack_dual(y).tangent.detach().clone()
            grad = torch.autograd.grad(y, primal)[0] if primal.requires_grad else None
        is_view = dual._base is primal
        return type(dual).__name__, is_view, dual.requires_grad, tangent, grad

    assert conform(program)[0] == ("Logged" if kind == "logged" else "Tensor")
