"""The API of dualgen.forward_ad against native forward AD: make_dual,
unpack_dual, levels and their errors, leaving a level, threads.

See forward_ad_checks.py for how the runs are compared.
"""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from forward_ad_checks import (
    APIS,
    assert_same,
    error_of,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
    run_both,
)
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD
from dualgen.levels import STATE

# --------------------------------------------------------------------------------------
# 1. API


def test_dual_level_as_context_manager():
    def fn(fwAD):
        x, t = randn(3), randn(3)
        with fwAD.dual_level() as level:
            out = fwAD.unpack_dual(fwAD.make_dual(x, t).sin())
        return level, out.primal, out.tangent

    (level, _, _), _ = run_both(fn)
    assert level == 0


def test_dual_level_as_decorator():
    def fn(fwAD):
        x, t = randn(3), randn(3)

        @fwAD.dual_level()
        def sin_jvp(x, t):
            return tuple(fwAD.unpack_dual(fwAD.make_dual(x, t).sin()))

        first = sin_jvp(x, t)
        second = sin_jvp(x, 2 * t)  # a fresh level for each call
        with pytest.raises(RuntimeError, match="no level exists"):
            fwAD.make_dual(x, t)
        return first, second

    run_both(fn)


def test_enter_and_exit_return_and_accept_indices():
    def fn(fwAD):
        first = fwAD.enter_dual_level()
        x = fwAD.make_dual(randn(2), randn(2))
        exited = fwAD.exit_dual_level(level=first)
        second = fwAD.enter_dual_level()
        exited_default = fwAD.exit_dual_level()
        return first, exited, second, exited_default, fwAD.unpack_dual(x).tangent

    (first, exited, second, exited_default, tangent), _ = run_both(fn)
    assert (first, exited, second, exited_default, tangent) == (0, None, 0, None, None)


def test_nested_enter_returns_increasing_indices():
    outer = dual_fwAD.enter_dual_level()
    inner = dual_fwAD.enter_dual_level()
    assert (outer, inner) == (0, 1)
    with dual_fwAD.dual_level() as innermost:
        assert innermost == 2
    assert dual_fwAD.exit_dual_level(level=inner) is None
    assert dual_fwAD.exit_dual_level(level=outer) is None
    # native has a single level
    native_fwAD.enter_dual_level()
    try:
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            native_fwAD.enter_dual_level()
    finally:
        native_fwAD.exit_dual_level()


@pytest.mark.parametrize("fwAD", APIS)
def test_unpack_dual_outside_any_level(fwAD):
    x = randn(3)
    out = fwAD.unpack_dual(x)
    assert out.primal is x
    assert out.tangent is None
    assert isinstance(out, fwAD.UnpackedDualTensor)


@pytest.mark.parametrize("fwAD", APIS)
def test_unpacked_dual_tensor_is_a_named_tuple(fwAD):
    assert issubclass(fwAD.UnpackedDualTensor, tuple)
    assert fwAD.UnpackedDualTensor._fields == ("primal", "tangent")
    x, t = randn(3), randn(3)
    with fwAD.dual_level():
        out = fwAD.unpack_dual(fwAD.make_dual(x, t))
        primal, tangent = out
        assert out[0] is primal is out.primal
        assert out[1] is tangent is out.tangent
        assert tangent is t
        assert len(out) == 2
    assert_close(primal, x)


def _in_level(fwAD, body):
    with fwAD.dual_level():
        return body()


def _already_dual(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    return fwAD.make_dual(d, randn(3))


def _already_dual_view(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    return fwAD.make_dual(d[1:], randn(2))


def _already_dual_result(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    return fwAD.make_dual(d.exp(), randn(3))


MAKE_DUAL_ERRORS = {
    "no_level": (
        lambda fwAD: fwAD.make_dual(randn(3), randn(3)),
        RuntimeError,
        ["no level exists", "enter_dual_level"],
    ),
    "wrong_tangent_shape": (
        lambda fwAD: _in_level(fwAD, lambda: fwAD.make_dual(randn(3), randn(4))),
        RuntimeError,
        ["different size", "[3]", "[4]"],
    ),
    "wrong_tangent_rank": (
        lambda fwAD: _in_level(fwAD, lambda: fwAD.make_dual(randn(2, 3), randn(6))),
        RuntimeError,
        ["different size", "[2, 3]", "[6]"],
    ),
    "integer_primal": (
        lambda fwAD: _in_level(fwAD, lambda: fwAD.make_dual(torch.arange(3), randn(3))),
        ValueError,
        ["primal", "floating point", "torch.int64"],
    ),
    "integer_tangent": (
        lambda fwAD: _in_level(fwAD, lambda: fwAD.make_dual(randn(3), torch.arange(3))),
        ValueError,
        ["tangent", "floating point", "torch.int64"],
    ),
    "bool_primal": (
        lambda fwAD: _in_level(
            fwAD, lambda: fwAD.make_dual(torch.ones(3, dtype=torch.bool), randn(3))
        ),
        ValueError,
        ["primal", "floating point", "torch.bool"],
    ),
    "already_dual": (
        lambda fwAD: _in_level(fwAD, lambda: _already_dual(fwAD)),
        RuntimeError,
        ["already has a forward gradient at the same level"],
    ),
    "view_of_dual": (
        lambda fwAD: _in_level(fwAD, lambda: _already_dual_view(fwAD)),
        RuntimeError,
        ["already has a forward gradient at the same level"],
    ),
    "result_of_dual": (
        lambda fwAD: _in_level(fwAD, lambda: _already_dual_result(fwAD)),
        RuntimeError,
        ["already has a forward gradient at the same level"],
    ),
}


@pytest.mark.parametrize("case", MAKE_DUAL_ERRORS)
def test_make_dual_errors_match_native(case):
    call, kind, fragments = MAKE_DUAL_ERRORS[case]
    native = error_of(lambda: call(native_fwAD))
    ours = error_of(lambda: call(dual_fwAD))
    assert type(native) is kind, native
    assert type(ours) is kind, ours
    for fragment in fragments:
        assert fragment in str(native), (fragment, str(native))
        assert fragment in str(ours), (fragment, str(ours))


@pytest.mark.parametrize("fwAD", APIS)
def test_exit_of_a_level_that_is_not_the_last_raises(fwAD):
    level = fwAD.enter_dual_level()
    try:
        with pytest.raises(RuntimeError, match="not the last one"):
            fwAD.exit_dual_level(level=level + 1)
        d = fwAD.make_dual(randn(2), randn(2))  # the level is still there
        assert fwAD.unpack_dual(d).tangent is not None
    finally:
        fwAD.exit_dual_level(level=level)


@pytest.mark.parametrize("fwAD", APIS)
def test_exit_without_a_level_raises(fwAD):
    with pytest.raises(RuntimeError):
        fwAD.exit_dual_level()


def test_exiting_nested_levels_out_of_order_raises():
    outer = dual_fwAD.enter_dual_level()
    inner = dual_fwAD.enter_dual_level()
    x = dual_fwAD.make_dual(randn(3), randn(3), level=outer)
    y = dual_fwAD.make_dual(x, randn(3), level=inner)
    with pytest.raises(RuntimeError, match="not the last one"):
        dual_fwAD.exit_dual_level(level=outer)
    # nothing changed: both levels and their tangents are intact
    assert dual_fwAD.unpack_dual(y, level=inner).tangent is not None
    assert dual_fwAD.unpack_dual(y, level=outer).tangent is not None
    dual_fwAD.exit_dual_level(level=inner)
    assert dual_fwAD.unpack_dual(y).tangent is not None
    dual_fwAD.exit_dual_level(level=outer)
    assert dual_fwAD.unpack_dual(y).tangent is None


@pytest.mark.parametrize("fwAD", APIS)
def test_exception_inside_dual_level_leaves_no_level(fwAD):
    with pytest.raises(KeyError, match="boom"), fwAD.dual_level():
        fwAD.make_dual(randn(2), randn(2))
        raise KeyError("boom")
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(randn(2), randn(2))


def test_exception_inside_inner_level_leaves_outer_level():
    with dual_fwAD.dual_level():
        x = dual_fwAD.make_dual(randn(2), randn(2))
        with pytest.raises(KeyError), dual_fwAD.dual_level():
            dual_fwAD.make_dual(x, randn(2))
            raise KeyError("boom")
        assert len(STATE.levels) == 1
        assert dual_fwAD.unpack_dual(x.sin()).tangent is not None
    with pytest.raises(RuntimeError, match="no level exists"):
        dual_fwAD.make_dual(randn(2), randn(2))


@pytest.mark.parametrize("fwAD", APIS)
def test_level_keyword_arguments(fwAD):
    with fwAD.dual_level() as level:
        t = randn(3)
        d = fwAD.make_dual(randn(3), t, level=level)
        assert fwAD.unpack_dual(d, level=level).tangent is t


# --------------------------------------------------------------------------------------
# 2. leaving a level drops tangents


def test_exit_drops_tangents_of_inputs_views_and_outputs():
    def fn(fwAD):
        x, t = randn(4), randn(4)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            y = d.exp() * 2
            v = y[1:3]
            inside = [fwAD.unpack_dual(a).tangent for a in (d, y, v)]
        after = [fwAD.unpack_dual(a).tangent for a in (d, y, v)]
        assert after == [None, None, None]
        with fwAD.dual_level():  # a new level does not see the old tangents
            again = [fwAD.unpack_dual(a).tangent for a in (d, y, v, v.sin())]
        assert again == [None, None, None, None]
        return inside, d, y, v

    run_both(fn)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "graph"])
@pytest.mark.parametrize("fwAD", APIS)
def test_exit_frees_tangents(fwAD, requires_grad):
    x = randn(4, requires_grad=requires_grad)
    with fwAD.dual_level():
        t = randn(4)
        d = fwAD.make_dual(x, t)
        y = d.exp()  # saves its result for backward when x requires grad
        z = torch.tanh(y)[1:]
        refs = [
            weakref.ref(t),
            weakref.ref(fwAD.unpack_dual(y).tangent),
            weakref.ref(fwAD.unpack_dual(z).tangent),
        ]
        del t
        gc.collect()
        assert all(r() is not None for r in refs)  # the level holds them
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    # the primals (and the graph) survive
    assert_close(y, x.exp())
    if requires_grad:
        (g,) = torch.autograd.grad(z.sum(), x)
        expected = ((1 - x.exp().tanh() ** 2) * x.exp()).detach()
        expected[0] = 0
        assert_close(g, expected)


# --------------------------------------------------------------------------------------
# 3. threads


def test_levels_are_per_thread():
    seen = {}
    with dual_fwAD.dual_level():
        d = dual_fwAD.make_dual(randn(3), randn(3))

        def worker():
            try:
                dual_fwAD.make_dual(randn(3), randn(3))
            except RuntimeError as exc:
                seen["error"] = str(exc)
            seen["tangent"] = dual_fwAD.unpack_dual(d).tangent
            seen["sin"] = dual_fwAD.unpack_dual(d.sin()).tangent

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        # the level is still there in this thread
        assert dual_fwAD.unpack_dual(d.sin()).tangent is not None
    assert "no level exists" in seen["error"]
    assert seen["tangent"] is None and seen["sin"] is None


def test_native_levels_are_global_documented():
    # Native forward AD levels are process-wide: the difference is deliberate.
    seen = {}
    with native_fwAD.dual_level():

        def worker():
            d = native_fwAD.make_dual(randn(3), randn(3))
            seen["tangent"] = native_fwAD.unpack_dual(d).tangent

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen["tangent"] is not None


def _threaded_function(z):
    return ((z.sin() * z).exp() / (1 + z * z)).sum(0)


def test_worker_threads_with_their_own_levels():
    torch.manual_seed(0)
    x, t = randn(3, 4), randn(3, 4)
    scales = [1.0, -2.0, 0.5, 3.0]
    expected = {}
    for s in scales:
        with native_fwAD.dual_level():
            out = _threaded_function(native_fwAD.make_dual(x, s * t))
            expected[s] = tuple(native_fwAD.unpack_dual(out))

    barrier = threading.Barrier(len(scales) + 1)
    results, errors = {}, []

    def worker(s):
        try:
            with dual_fwAD.dual_level():
                d = dual_fwAD.make_dual(x, s * t)
                barrier.wait(timeout=30)  # all levels are open at once
                out = _threaded_function(d)
                barrier.wait(timeout=30)
                results[s] = tuple(dual_fwAD.unpack_dual(out))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(s,)) for s in scales]
    finished = False
    try:
        with dual_fwAD.dual_level():
            mine = dual_fwAD.make_dual(x, -t)
            for thread in threads:
                thread.start()
            barrier.wait(timeout=30)
            main_out = _threaded_function(mine)
            barrier.wait(timeout=30)
            main_result = tuple(dual_fwAD.unpack_dual(main_out))
        finished = True
    finally:
        if not finished:
            barrier.abort()  # release the workers waiting for this thread
        for thread in threads:
            if thread.ident is not None:
                thread.join(timeout=30)
    assert not errors
    for s in scales:
        assert_same(results[s], expected[s], f"scale {s}")
    assert_same(main_result, (expected[1.0][0], -expected[1.0][1]))
