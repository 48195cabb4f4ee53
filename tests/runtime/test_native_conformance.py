"""Conformance with PyTorch's own forward-AD tests: the level / dual-tensor API.

Written from reading what `test/test_autograd.py` in pytorch/pytorch checks in
`TestAutogradForwardMode`, `TestAutogradForwardModeBatchedGrad` and the forward-AD
tests of `TestAutograd` (one test per behaviour, in our own words). Each program
takes an `Api` (the forward-AD module and the gradcheck to use) and runs once
against native PyTorch (`torch.autograd.forward_ad`, `torch.autograd.gradcheck`)
and once against dualgen (`dualgen.forward_ad`, `dualgen.gradcheck`); `conform`
asserts the same result: values, dtypes, tangent presence (None against None),
identities returned as booleans, or the same error type with the key phrase
PyTorch's test looks for.

Every behaviour matches native. Where dualgen differs on purpose (nested levels,
JVPs derived from `backward`, zero tangents where native keeps a stale one, its
own gradcheck messages), the test asserts dualgen's documented behaviour
(docs/differences.md), pins native's, and says so in its docstring.

This module has the helpers (imported by its siblings) and make_dual, levels,
forward grad mode, unpack_dual; `test_native_conformance_views.py` has views,
in-place ops, out= and vmap; `test_native_conformance_functions.py` custom
Functions; `test_native_conformance_gradcheck.py` gradcheck(check_forward_ad=True).
"""

from __future__ import annotations

import gc
import re
from typing import Any, NamedTuple

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from leaks import release_levels
from torch.utils._mode_utils import no_dispatch

import dualgen
import dualgen.forward_ad as dual_fwAD

F64, C128 = torch.float64, torch.complex128


class Api(NamedTuple):
    name: str
    fwAD: Any
    gradcheck: Any


NATIVE = Api("native", native_fwAD, torch.autograd.gradcheck)
DUALGEN = Api("dualgen", dual_fwAD, dualgen.gradcheck)


def level_active(api: Api) -> bool:
    """Whether a forward-AD level of `api` is active (PyTorch's tests read
    `fwAD._current_level`)."""
    return api.fwAD._current_level >= 0


# --------------------------------------------------------------------------------------
# running one program under both


def _outcome(program, api, seed):
    torch.manual_seed(seed)
    try:
        return True, program(api)
    except Exception as exc:  # noqa: BLE001 - the error is the result here
        return False, exc


def _same(actual, expected, path):
    if expected is None or actual is None:
        assert (
            actual is None and expected is None
        ), f"{path}: dualgen gives {actual!r}, native gives {expected!r}"
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: dualgen gives {actual!r}"
        assert actual.dtype == expected.dtype, f"{path}: dtype"
        assert actual.shape == expected.shape, f"{path}: shape"
        torch.testing.assert_close(
            actual.detach().resolve_conj().resolve_neg(),
            expected.detach().resolve_conj().resolve_neg(),
            equal_nan=True,
            msg=lambda m: f"{path}: {m}",
        )
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: dualgen gives {actual!r}"
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _same(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: dualgen {actual!r}, native {expected!r}"


def conform(program, *, error=None, match=None, seed=0):
    """program(api) under native and under dualgen (same seed): the same result, or,
    where `error` is given, both raise it (dualgen: the type native raises, or a
    subclass) with a message matching `match`, a regex or a list of them that must
    all match (native is checked too, so a change in PyTorch shows up here).
    Returns dualgen's result or error."""
    native_ok, native = _outcome(program, NATIVE, seed)
    dual_ok, dual = _outcome(program, DUALGEN, seed)
    if error is not None:
        assert not native_ok and isinstance(
            native, error
        ), f"native no longer raises {error.__name__}: {native!r}"
        phrases = [match] if isinstance(match, str) else list(match)
        for phrase in phrases:
            assert re.search(
                phrase, str(native), re.DOTALL
            ), f"native's message changed: {native}"
        if dual_ok:
            pytest.fail(f"native raises {native!r}; dualgen returns {dual!r}")
        if not (
            isinstance(dual, type(native))
            and all(re.search(phrase, str(dual), re.DOTALL) for phrase in phrases)
        ):
            raise AssertionError(
                f"native raises {type(native).__name__} matching {match!r}; "
                f"dualgen raises {type(dual).__name__}: {dual}"
            ) from dual
        return dual
    if not native_ok:
        pytest.fail(f"native raises {native!r} (the program is wrong)")
    if not dual_ok:
        raise dual
    _same(dual, native, "result")
    return dual


@pytest.fixture(autouse=True)
def no_level_left_behind():
    """Every test leaves no level (native or dualgen), no mode pushed, and forward
    grad mode enabled."""
    yield
    leaked = release_levels()
    assert not leaked, f"left behind: {leaked}"


def rand(*shape, dtype=F64):
    return torch.rand(*shape, dtype=dtype)


FAST = [pytest.param(False, id="slow"), pytest.param(True, id="fast")]
# gradcheck's failure messages are dualgen's own ("Jacobian mismatch for output 0
# (real part) with respect to input 1, forward mode, in f" against native's
# "Jacobian computed with forward mode mismatch for output 0 with respect to input
# 1"); the key phrases both carry, as in tests/harness/test_gradcheck_functions.py:
FORWARD_MISMATCH = [
    r"mismatch for output 0\b.*with respect to input {}",
    "forward mode",
]


def forward_mismatch(input_index):
    return [FORWARD_MISMATCH[0].format(input_index), FORWARD_MISMATCH[1]]


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


def test_tangent_of_another_size_raises_and_a_slice_of_the_right_size_is_taken():
    def program(api):
        tangent = rand(3)
        with api.fwAD.dual_level():
            api.fwAD.make_dual(rand(2), tangent[1:])  # the right size: accepted
            api.fwAD.make_dual(rand(2), tangent)

    conform(
        program,
        error=RuntimeError,
        match="Trying to set a forward gradient that has a different size",
    )


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


def test_zero_numel_tangent_at_another_storage_offset_is_reused():
    def program(api):
        primal = torch.tensor([1.0], dtype=F64).as_strided((0,), (1,), 1)
        tangent = torch.tensor([1.0], dtype=F64).as_strided((0,), (1,), 2)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            return api.fwAD.unpack_dual(dual).tangent is tangent

    assert conform(program) is True


def test_one_element_tangent_with_other_strides_then_an_empty_slice():
    def program(api):
        primal = torch.tensor([1.0], dtype=F64).as_strided((1,), (2,), 0)
        tangent = torch.tensor([1.0], dtype=F64).as_strided((1,), (1,), 0)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            return tuple(api.fwAD.unpack_dual(dual[1:]))

    conform(program)


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


def test_tangent_that_is_dual_at_the_same_level_is_rejected():
    def program(api):
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(rand(2), rand(2))
            api.fwAD.make_dual(rand(2), dual)

    conform(
        program,
        error=RuntimeError,
        match="has a forward gradient at the same level",
    )


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


# --------------------------------------------------------------------------------------
# 2. levels


def test_tangent_is_the_given_one_inside_and_gone_after_the_level():
    def program(api):
        primal, tangent = rand(2), rand(2)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(primal, tangent)
            inside = api.fwAD.unpack_dual(dual)
        after = api.fwAD.unpack_dual(dual)
        return inside.primal, inside.tangent is tangent, tuple(after)

    conform(program)


def test_a_new_level_does_not_see_tangents_of_the_last_one():
    def program(api):
        foo, bar, baz = rand(2), rand(2), rand(2)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, bar)
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


# --------------------------------------------------------------------------------------
# 3. forward grad mode (torch._C._set_fwd_grad_enabled)


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
# 4. unpack_dual, printing, memory sharing, backward through packing


def test_unpack_dual_returns_a_named_tuple_and_a_fresh_primal_view():
    def program(api):
        foo, bar = rand(2), rand(2)
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, bar)
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


def test_detach_drops_the_tangent():
    def program(api):
        foo = rand(2).requires_grad_()
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, rand(2))
            primal, tangent = api.fwAD.unpack_dual(dual.detach() * 2)
            return primal.requires_grad, primal, tangent

    conform(program)


def test_no_grad_keeps_the_tangent_without_requires_grad():
    def program(api):
        foo = rand(2).requires_grad_()
        with api.fwAD.dual_level():
            dual = api.fwAD.make_dual(foo, rand(2))
            with torch.no_grad():
                out = dual * 3
            primal, tangent = api.fwAD.unpack_dual(out)
            return primal.requires_grad, tangent.requires_grad, primal, tangent

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
