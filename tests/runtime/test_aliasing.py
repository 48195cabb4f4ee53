"""Aliasing, dtype-changing views and conjugate bits, against native forward AD.

Each case runs the same code under `torch.autograd.forward_ad` and
`dualgen.forward_ad` and compares primals, tangents (None against None), dtypes and
strides where native fixes them. Where native is wrong (an in-place op reading its
own target through another operand) the reference is the same program written
out of place, and central finite differences; where native has no counterpart
(nested levels) it is nested `torch.func.jvp`. Everything is small and seeded.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

import dualgen.forward_ad as dual_fwAD

F64, C128 = torch.float64, torch.complex128


def tangent_of(fwAD, x):
    return fwAD.unpack_dual(x).tangent


def compare(fn):
    """fn(fwAD) -> nested tuples of tensors / None / plain values, under both; or
    the same error (type and message) from both."""
    results = []
    for fwAD in (native_fwAD, dual_fwAD):
        torch.manual_seed(0)
        try:
            with fwAD.dual_level():
                results.append(fn(fwAD))
        except Exception as error:  # noqa: BLE001 - the error is the result here
            results.append(error)
    expected, actual = results
    if isinstance(expected, Exception) or isinstance(actual, Exception):
        assert (type(actual), str(actual)) == (type(expected), str(expected))
        return
    _assert_same(actual, expected, "result")


def _assert_same(actual, expected, path):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: dualgen gives {actual!r}"
        assert actual.dtype == expected.dtype, f"{path}: dtype"
        assert_close(
            actual.resolve_conj().resolve_neg(),
            expected.resolve_conj().resolve_neg(),
            msg=lambda m: f"{path}: {m}",
        )
    else:
        assert actual == expected, f"{path}: dualgen {actual!r}, native {expected!r}"


def dual(fwAD, primal, tangent):
    """A dual that owns its memory (clone), so in-place ops may write it."""
    return fwAD.make_dual(primal, tangent).clone()


# --------------------------------------------------------------------------------------
# an operand that reads the target of an in-place op


def test_setitem_of_an_overlapping_view_of_the_target_raises_as_native():
    def fn(fwAD):
        x = dual(fwAD, torch.arange(4.0, dtype=F64), torch.arange(1.0, 5.0, dtype=F64))
        x[torch.tensor([0, 3])] = x[1:3]
        return tuple(fwAD.unpack_dual(x))

    compare(fn)


@pytest.mark.parametrize(
    "update",
    [
        pytest.param(lambda x: x.__setitem__(torch.tensor([0, 2]), x[1]), id="index"),
        pytest.param(
            lambda x: x.__setitem__(torch.tensor([True, False, True]), x[1]), id="mask"
        ),
        pytest.param(lambda x: x.copy_(x.flip(0)), id="copy_flip"),
        pytest.param(lambda x: x.add_(x), id="add_self"),
        pytest.param(
            lambda x: x.index_add_(0, torch.tensor([0]), x[1:2]), id="index_add"
        ),
        pytest.param(lambda x: x.view(-1)[...].copy_(x.view(-1)), id="copy_view"),
    ],
)
def test_in_place_reading_its_target_as_native(update):
    def fn(fwAD):
        p = torch.arange(1.0, 7.0, dtype=F64).reshape(3, 2)
        x = dual(fwAD, p, p * 10)
        update(x)
        return tuple(fwAD.unpack_dual(x))

    compare(fn)


def test_setitem_of_a_zero_dim_dual_into_its_own_view():
    def fn(fwAD):
        x = dual(fwAD, torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64))
        x.view(-1)[...] = x
        return tuple(fwAD.unpack_dual(x))

    compare(fn)


# Where native reads the updated target: the reference is the same function out of
# place (its JVP by torch.func) and finite differences.
SELF_READING = {
    "mul_self": (lambda x: x.mul_(x), lambda x: x * x),
    "addcmul_self": (lambda x: x.addcmul_(x, x), lambda x: x + x * x),
    "div_shifted_self": (lambda x: x.div_(x + 1), lambda x: x / (x + 1)),
    "pow_self": (lambda x: x.pow_(x), lambda x: x**x),
    "row_mul_row": (
        lambda x: x[0].mul_(x[1]),
        lambda x: torch.stack([x[0] * x[1], x[1], x[2]]),
    ),
    "mul_transposed_twice": (lambda x: x.mul_(x.t().t()), lambda x: x * x),
}


@pytest.mark.parametrize("name", sorted(SELF_READING))
def test_in_place_reading_its_target_is_right_where_native_is_not(name):
    in_place, out_of_place = SELF_READING[name]
    p = torch.arange(1.0, 7.0, dtype=F64).reshape(3, 2) / 3
    t = torch.randn(3, 2, dtype=F64)
    with dual_fwAD.dual_level():
        x = dual(dual_fwAD, p, t)
        returned = in_place(x)
        value, tangent = dual_fwAD.unpack_dual(x)
        assert tangent_of(dual_fwAD, returned) is not None
    expected_value, expected_tangent = torch.func.jvp(out_of_place, (p,), (t,))
    assert_close(value, expected_value)
    assert_close(tangent, expected_tangent)
    eps = 1e-6
    fd = (out_of_place(p + eps * t) - out_of_place(p - eps * t)) / (2 * eps)
    assert_close(tangent, fd, atol=1e-6, rtol=1e-6)


def test_native_reads_the_updated_target():
    """Pins the native defect the docs list (if torch fixes it, update the docs)."""
    with native_fwAD.dual_level():
        x = dual(
            native_fwAD, torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64)
        )
        x.mul_(x)
        assert tangent_of(native_fwAD, x).item() == 6.0  # right: 2 * 2 * 1 = 4
    with dual_fwAD.dual_level():
        x = dual(dual_fwAD, torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64))
        x.mul_(x)
        assert tangent_of(dual_fwAD, x).item() == 4.0


def test_view_multiplied_by_its_base_in_place():
    p, t = torch.randn(4, dtype=F64), torch.randn(4, dtype=F64)
    with dual_fwAD.dual_level():
        x = dual(dual_fwAD, p, t)
        x[:2].mul_(x[2:])
        tangent = tangent_of(dual_fwAD, x)
    expected = torch.cat([t[:2] * p[2:] + p[:2] * t[2:], t[2:]])
    assert_close(tangent, expected)


# --------------------------------------------------------------------------------------
# dtype-changing views and lazy bits


def test_real_imag_and_view_as_real():
    def fn(fwAD):
        x = fwAD.make_dual(torch.randn(3, dtype=C128), torch.randn(3, dtype=C128))
        views = [x.real, x.imag, torch.view_as_real(x), x.conj().imag]
        return [tuple(fwAD.unpack_dual(v)) for v in views]

    compare(fn)


def test_view_as_complex():
    def fn(fwAD):
        x = fwAD.make_dual(torch.randn(3, 2, dtype=F64), torch.randn(3, 2, dtype=F64))
        c = torch.view_as_complex(x)
        return tuple(fwAD.unpack_dual(c)), tuple(fwAD.unpack_dual(c.real))

    compare(fn)


def test_in_place_through_real_view():
    def fn(fwAD):
        x = dual(fwAD, torch.randn(3, dtype=C128), torch.randn(3, dtype=C128))
        x.real.mul_(2)
        x.imag.add_(fwAD.make_dual(torch.ones(3, dtype=F64), torch.ones(3, dtype=F64)))
        return tuple(fwAD.unpack_dual(x))

    compare(fn)


def test_views_of_a_dual_with_a_conjugate_tangent():
    def fn(fwAD):
        t = torch.randn(3, dtype=C128).conj()
        x = fwAD.make_dual(torch.randn(3, dtype=C128), t)
        views = [x.real, x.imag, torch.view_as_real(x)]
        return [tangent_of(fwAD, v) for v in views]

    compare(fn)


def nested_pair(f, x, u, w):
    """(dualgen, torch.func): the first-order tangent of f at x along u, and its
    tangent along w, from two dualgen levels and from nested torch.func.jvp."""
    expected = torch.func.jvp(lambda a: torch.func.jvp(f, (a,), (u,))[1], (x,), (w,))
    with dual_fwAD.dual_level():
        outer = dual_fwAD.make_dual(x, w)
        with dual_fwAD.dual_level():
            inner = dual_fwAD.unpack_dual(f(dual_fwAD.make_dual(outer, u))).tangent
        actual = dual_fwAD.unpack_dual(inner)
    return actual, expected


def test_view_as_complex_under_nested_levels():
    p, u, w = (torch.randn(3, 2, dtype=F64) for _ in range(3))

    def f(x):
        return torch.view_as_complex(x).exp()

    actual, expected = nested_pair(f, p, u, w)
    assert_close(actual.primal, expected[0])
    assert_close(actual.tangent, expected[1])


@pytest.mark.parametrize("op", ["sin_", "mul_2", "exp_"])
def test_in_place_on_a_conjugate_view_under_nested_levels(op):
    z, u, w = (torch.randn(3, dtype=C128) for _ in range(3))
    update = {
        "sin_": lambda v: v.sin_(),
        "mul_2": lambda v: v.mul_(2 + 1j),
        "exp_": lambda v: v.exp_(),
    }[op]

    def f(x):
        y = x.clone()
        update(y.conj())
        return y

    actual, expected = nested_pair(f, z, u, w)
    assert_close(actual.primal, expected[0])
    # No tangent is a symbolic zero (a linear update has no second-order term).
    second = actual.tangent if actual.tangent is not None else torch.zeros_like(z)
    assert_close(second, expected[1])


# --------------------------------------------------------------------------------------
# unpack_dual's primal and make_dual's tangent


def test_a_view_of_an_unpacked_primal_is_a_plain_view():
    def fn(fwAD):
        y = dual(fwAD, torch.randn(3, dtype=F64), torch.ones(3, dtype=F64))
        p = fwAD.unpack_dual(y).primal
        v = p[:2]
        before = tangent_of(fwAD, v)
        v.mul_(2)
        w = p.view(3)
        w.mul_(fwAD.make_dual(torch.ones(3, dtype=F64), torch.ones(3, dtype=F64)))
        return before, tuple(fwAD.unpack_dual(y)), tangent_of(fwAD, p)

    compare(fn)


def _layouts():
    p = torch.randn(3, 3, dtype=F64)
    offset_primal = torch.randn(4, 3, dtype=F64)[1:]
    c = torch.randn(3, dtype=C128)
    return {
        "same layout": (p, torch.randn(3, 3, dtype=F64)),
        "float32": (p, torch.randn(3, 3)),
        "float32 transposed": (p, torch.randn(3, 3).mT),
        "transposed": (p, torch.randn(3, 3, dtype=F64).mT),
        "larger storage": (p, torch.randn(4, 3, dtype=F64)[:3]),
        "offset tangent": (p, torch.randn(4, 3, dtype=F64)[1:]),
        "offset primal": (offset_primal, torch.randn(3, 3, dtype=F64)),
        "both offset": (offset_primal, torch.randn(4, 3, dtype=F64)[1:]),
        "conjugate tangent": (c, torch.randn(3, dtype=C128).conj()),
        "conjugate primal": (c.conj(), torch.randn(3, dtype=C128)),
        "both conjugate": (c.conj(), torch.randn(3, dtype=C128).conj()),
        "negative tangent": (c, torch.randn(3, dtype=C128)._neg_view()),
        "complex64 tangent": (c, torch.randn(3, dtype=torch.complex64)),
        "expanded tangent": (p, torch.randn(3, 1, dtype=F64).expand(3, 3)),
        "expanded primal": (torch.randn(3, 1, dtype=F64).expand(3, 3), p),
    }


@pytest.mark.parametrize("case", list(_layouts()))
def test_make_dual_keeps_or_copies_the_tangent_as_native(case):
    primal, tangent = _layouts()[case]
    seen = []
    for fwAD in (native_fwAD, dual_fwAD):
        with fwAD.dual_level():
            t = tangent.clone() if tangent._base is None else tangent
            try:
                stored = tangent_of(fwAD, fwAD.make_dual(primal, t))
            except RuntimeError as error:  # native refuses some layouts
                seen.append(str(error))
                continue
            seen.append(
                (
                    stored.dtype,
                    stored.stride(),
                    stored.storage_offset(),
                    stored.is_conj(),
                    stored.is_neg(),
                    stored.data_ptr() == t.data_ptr(),
                )
            )
            assert_close(
                stored.resolve_conj().resolve_neg().to(C128),
                t.resolve_conj().resolve_neg().to(C128),
            )
    assert seen[1] == seen[0], f"dualgen {seen[1]}, native {seen[0]}"


class _RecordingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_a_mode_above_dualgen_sees_make_dual_and_unpack_dual():
    """make_dual and unpack_dual skip dualgen's mode where it would do nothing
    (their cheap path), never another mode pushed inside the level."""
    with dual_fwAD.dual_level():
        with _RecordingMode() as recording:
            x = dual_fwAD.make_dual(torch.ones(3, dtype=F64), torch.ones(3, dtype=F64))
            y = dual_fwAD.unpack_dual(x * 2)
        assert_close(y.tangent, torch.full((3,), 2.0, dtype=F64))
    assert recording.ops.count(torch.ops.aten.alias.default) == 2


def test_make_dual_of_a_view_of_an_outer_dual_keeps_the_outer_tangent():
    x, u, w = (torch.randn(4, dtype=F64) for _ in range(3))
    with dual_fwAD.dual_level():
        outer = dual_fwAD.make_dual(x, w)[1:]
        with dual_fwAD.dual_level():
            inner = dual_fwAD.make_dual(outer, u[1:])
            y = dual_fwAD.unpack_dual(inner.sin())
            assert dual_fwAD.unpack_dual(y.primal, level=0).tangent is not None
        assert_close(
            dual_fwAD.unpack_dual(y.tangent).tangent, -x[1:].sin() * u[1:] * w[1:]
        )
        assert_close(dual_fwAD.unpack_dual(y.primal).tangent, x[1:].cos() * w[1:])


def test_in_place_on_the_user_tangent_after_make_dual_as_native():
    def fn(fwAD):
        t = torch.zeros(3, dtype=F64)
        x = fwAD.make_dual(torch.ones(3, dtype=F64), t)
        x.mul_(2)  # make_dual's result is a view: this updates its tangent in place
        return t.clone(), tangent_of(fwAD, x)

    compare(fn)


@pytest.mark.parametrize(
    "name",
    [
        "mul_",
        "copy_transposed",
        "copy_into_transposed",
        "add_0d",
        "dual_mul_",
        "add_transposed",
        "mul_transposed",
        "copy_strided",
        "add_into_transposed",
    ],
)
def test_mixed_dtypes_in_place_as_native(name):
    def y64(fwAD):
        return fwAD.make_dual(torch.ones(2, 2, dtype=F64), torch.ones(2, 2, dtype=F64))

    def fn(fwAD):
        if name == "mul_":
            x = torch.ones(2, 2).mul_(y64(fwAD))
        elif name == "copy_transposed":
            x = torch.ones(2, 2).copy_(y64(fwAD).t())
        elif name == "copy_into_transposed":
            base = torch.ones(2, 2)
            base.t().copy_(y64(fwAD))
            x = base
        elif name == "add_0d":
            s = fwAD.make_dual(
                torch.tensor(1.0, dtype=F64), torch.tensor(1.0, dtype=F64)
            )
            x = torch.ones(2, 2).add_(s)
        elif name == "add_transposed":  # native: zeros of self + a tangent
            x = torch.ones(2, 2).add_(y64(fwAD).t())
        elif name == "mul_transposed":  # native: laid out as the tangent
            x = torch.ones(2, 2).mul_(y64(fwAD).t())
        elif name == "copy_strided":
            strided = torch.zeros(2, 4, dtype=F64)[:, ::2]
            x = torch.ones(2, 2).copy_(
                fwAD.make_dual(strided, torch.ones(2, 2, dtype=F64))
            )
        elif name == "add_into_transposed":
            x = torch.ones(2, 2).t().add_(y64(fwAD))
        else:
            x = dual(fwAD, torch.ones(2, 2), torch.ones(2, 2))
            x.mul_(y64(fwAD))
        t = tangent_of(fwAD, x)
        return x, t, None if t is None else t.stride()

    compare(fn)
