"""In-place comparisons (`eq_`, `ne_`, `lt_`, `le_`, `gt_`, `ge_`, Scalar and Tensor
overloads) and logical ops (`logical_and_`, `logical_or_`, `logical_xor_`,
`logical_not_`) on duals.

They store 0 or 1 in self's floating dtype: a piecewise constant function of self
and other, so self's tangent after the op is zero. With a tangent on `other` alone,
self gets none (as native). Native gets the comparisons right and is the reference
there; for the logical ops it leaves self's old tangent in place (pinned below), so
the reference is native's values and a zero tangent (docs/differences.md).
"""

from __future__ import annotations

import pytest
import torch
from forward_ad_checks import assert_same
from native_conformance_checks import (
    DUALGEN,
    NATIVE,
    conform,
    no_level_left_behind,  # noqa: F401 - autouse
    outcomes,
)

import dualgen
import dualgen.forward_ad as dual_fwAD
from dualgen.generated.registry import KERNELS

aten = torch.ops.aten

COMPARISONS = ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"]
LOGICAL = ["logical_and_", "logical_or_", "logical_xor_"]

# (op, overload): every overload torch registers for these in-place ops.
OVERLOADS = (
    [(op, overload) for op in COMPARISONS for overload in ("Scalar", "Tensor")]
    + [(op, "default") for op in LOGICAL]
    + [("logical_not_", "default")]
)
IDS = [f"{op}.{overload}" for op, overload in OVERLOADS]

DTYPES = [torch.float64, torch.float32]

# Where the tangents are: self only, other only, both.
DUALS = ["self", "other", "both"]

# What self is: a dual (make_dual's result cloned), make_dual's result itself (a
# view of the user's primal holding the user's tangent), or a view of a dual (the
# tangent lives on the base).
SELF_IS = ["dual", "make_dual", "view"]


def _takes_tensor_other(op, overload):
    return overload in ("Tensor", "default") and op != "logical_not_"


def test_every_overload_is_covered():
    registered = {
        (op, overload)
        for op in COMPARISONS + LOGICAL + ["logical_not_"]
        for overload in getattr(aten, op).overloads()
    }
    assert registered == set(OVERLOADS)
    for op, overload in OVERLOADS:
        assert getattr(getattr(aten, op), overload) in KERNELS


def _values(dtype):
    # Ties with the other operand (0.5) and zeros, so every op gives both 0 and 1.
    self_p = torch.tensor([[0.25, 0.5, 0.0], [0.0, 0.5, 1.0]], dtype=dtype)
    other_p = torch.tensor([0.5, 0.0, 0.0], dtype=dtype)  # broadcast over rows
    return self_p, other_p


def _program(op, overload, duals, dtype, self_is):
    """A program(api) running the op through torch.ops.aten; it returns whether the
    op returned self, self's primal and tangent, the base's (for a view) and
    other's."""

    def program(api):
        fwAD = api.fwAD
        self_p, other_p = _values(dtype)
        self_t = torch.randn(self_p.shape, dtype=dtype)
        other_t = torch.randn(other_p.shape, dtype=dtype)
        with fwAD.dual_level():
            base = None
            if self_is == "view":
                base_p = torch.randn(4, 3, dtype=dtype)
                base_p[1:3] = self_p
                base_t = torch.randn(4, 3, dtype=dtype)
                base_t[1:3] = self_t
                if duals == "other":
                    base = base_p
                else:
                    base = fwAD.make_dual(base_p, base_t).clone()
                target = base[1:3]
            elif duals == "other":
                target = self_p.clone()
            elif self_is == "make_dual":
                target = fwAD.make_dual(self_p, self_t)
            else:
                target = fwAD.make_dual(self_p, self_t).clone()
            other = other_p
            if duals in ("other", "both"):
                other = fwAD.make_dual(other_p, other_t)
            if overload == "Scalar":
                args = (0.5,)
            elif op == "logical_not_":
                args = ()
            else:
                args = (other,)
            returned = getattr(getattr(aten, op), overload)(target, *args)
            out = (returned is target,) + tuple(fwAD.unpack_dual(target))
            if base is not None:
                out += tuple(fwAD.unpack_dual(base))
            if _takes_tensor_other(op, overload):
                out += tuple(fwAD.unpack_dual(other))
            return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in out)

    return program


def _cases():
    for (op, overload), case_id in zip(OVERLOADS, IDS):
        for duals in DUALS:
            if duals != "self" and not _takes_tensor_other(op, overload):
                continue
            for self_is in SELF_IS:
                if duals == "other" and self_is == "make_dual":
                    continue  # self has no tangent: no make_dual
                yield pytest.param(
                    op, overload, duals, self_is, id=f"{case_id}-{duals}-{self_is}"
                )


CASES = list(_cases())
COMPARISON_CASES = [c for c in CASES if c.values[0] in COMPARISONS]
LOGICAL_CASES = [c for c in CASES if c.values[0] not in COMPARISONS]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op, overload, duals, self_is", COMPARISON_CASES)
def test_inplace_comparison_is_native(op, overload, duals, self_is, dtype):
    """Native is right for comparisons: the same values and tangents (zero for self
    and, for a view, the view's part of its base; none where self had none; other's
    tangent untouched)."""
    out = conform(_program(op, overload, duals, dtype, self_is))
    returned_self, primal, tangent = out[:3]
    assert returned_self
    assert set(primal.unique().tolist()) == {0.0, 1.0}
    if duals == "other":
        assert tangent is None
    else:
        assert tangent.dtype == dtype and not tangent.any()
    if self_is == "view" and duals != "other":
        base_tangent = out[4]
        assert not base_tangent[1:3].any() and base_tangent[0].all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op, overload, duals, self_is", LOGICAL_CASES)
def test_inplace_logical_op_gives_a_zero_tangent(op, overload, duals, self_is, dtype):
    """Native's values; a zero tangent for self (and the view's part of its base,
    the rest of the base's tangent untouched), where native keeps self's old tangent
    (pinned, so this is revisited when PyTorch fixes it). With a tangent on other
    alone, native is right (self gets none) and is the reference."""
    program = _program(op, overload, duals, dtype, self_is)
    if duals == "other":
        out = conform(program)
        assert out[2] is None
        return
    (native_ok, native), (dual_ok, dual) = outcomes(program)
    assert native_ok, native
    if not dual_ok:
        raise dual
    self_p, _ = _values(dtype)
    torch.manual_seed(0)
    old_tangent = torch.randn(self_p.shape, dtype=dtype)
    # native: the op runs, the tangent is the one self had before it
    assert_same(native[2], old_tangent, "native's stale tangent")
    assert native[2].any(), "native now updates the tangent: compare with native"

    returned_self, primal, tangent = dual[:3]
    assert returned_self
    assert_same(primal, native[1], "primal")
    assert set(primal.unique().tolist()) == {0.0, 1.0}
    assert tangent.dtype == dtype and not tangent.any()
    rest = 3
    if self_is == "view":
        base_primal, base_tangent = dual[3:5]
        assert_same(base_primal, native[3], "base primal")
        assert not base_tangent[1:3].any()
        assert_same(base_tangent[0], native[4][0], "base tangent outside the view")
        assert_same(base_tangent[3], native[4][3], "base tangent outside the view")
        rest = 5
    # other (and its tangent) as native leaves them
    for i in range(rest, len(dual)):
        assert_same(dual[i], native[i], f"output {i}")


def _method_cases():
    for op in COMPARISONS:
        yield pytest.param(op, 0.5, id=f"{op}-scalar")
        yield pytest.param(op, "tensor", id=f"{op}-tensor")
        yield pytest.param(op, "0-d", id=f"{op}-0-d")
    for op in LOGICAL:
        yield pytest.param(op, "tensor", id=f"{op}-tensor")
    yield pytest.param("logical_not_", None, id="logical_not_")


@pytest.mark.parametrize("op, other", list(_method_cases()))
def test_method_call_on_a_dual_gives_a_zero_tangent(op, other):
    """The Tensor methods users write (`x.eq_(0.5)`, `x.gt_(y)`) reach these
    overloads."""
    if other == "tensor":
        other = torch.full((3,), 0.5, dtype=torch.float64)
    elif other == "0-d":
        other = torch.tensor(0.5, dtype=torch.float64)
    args = () if other is None else (other,)
    with dual_fwAD.dual_level():
        dual = dual_fwAD.make_dual(
            torch.rand(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        ).clone()
        assert getattr(dual, op)(*args) is dual
        tangent = dual_fwAD.unpack_dual(dual).tangent
        assert tangent is not None and not tangent.any()


@pytest.mark.parametrize("alias", ["greater_", "less_", "greater_equal_", "not_equal_"])
def test_aliases_reach_the_kernels(alias):
    """`x.greater_(0.5)` and the other aliases decompose to gt_ and the rest."""
    with dual_fwAD.dual_level():
        dual = dual_fwAD.make_dual(
            torch.rand(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        ).clone()
        getattr(dual, alias)(0.5)
        assert not dual_fwAD.unpack_dual(dual).tangent.any()


@pytest.mark.parametrize("op", ["lt_", "eq_", "logical_and_", "logical_xor_"])
def test_self_as_other(op):
    """`x.op_(x)`: the operand aliases the target; the tangent is zero (native:
    zero for the comparisons)."""

    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(
                torch.rand(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
            ).clone()
            getattr(dual, op)(dual)
            return tuple(api.fwAD.unpack_dual(dual))

    if op in COMPARISONS:
        primal, tangent = conform(program)
    else:
        primal, tangent = program(DUALGEN)
        assert_same(primal, program(NATIVE)[0], "primal")
    assert tangent is not None and not tangent.any()


def test_nested_levels_give_zero_tangents_at_both():
    with dual_fwAD.dual_level():
        outer = dual_fwAD.make_dual(
            torch.rand(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        )
        with dual_fwAD.dual_level():
            inner = dual_fwAD.make_dual(outer, torch.ones(3, dtype=torch.float64))
            x = inner.clone()
            x.gt_(0.5)
            inner_tangent = dual_fwAD.unpack_dual(x).tangent
            assert inner_tangent is not None and not inner_tangent.any()
        outer_tangent = dual_fwAD.unpack_dual(x).tangent
        assert outer_tangent is not None and not outer_tangent.any()


@pytest.mark.parametrize("op, overload", OVERLOADS, ids=IDS)
def test_gradcheck(op, overload):
    """Forward and backward (the VJP kernels through the tape) against central
    differences, away from the ties where the op jumps."""
    kernel = getattr(getattr(aten, op), overload)
    x = torch.tensor([[0.1, 0.7, -0.4], [0.9, -0.2, 0.3]], dtype=torch.float64)
    y = torch.tensor([0.45, -0.6, 0.8], dtype=torch.float64)
    x.requires_grad_()
    y.requires_grad_()
    if overload == "Scalar":
        inputs, fn = (x,), lambda a: kernel(a.clone(), 0.5)
    elif op == "logical_not_":
        inputs, fn = (x,), lambda a: kernel(a.clone())
    else:
        inputs, fn = (x, y), lambda a, b: kernel(a.clone(), b)
    assert dualgen.gradcheck(fn, inputs, check_forward_ad=True)
