"""Operators on a formula's temporaries (csrc/dualgen/temporaries.h) write into
them only where nothing can tell: the result is ATen's out-of-place result bit
for bit (values, dtype, sizes, strides), and every C++ kernel gives the same
tangents with the reuse on and off."""

from __future__ import annotations

import itertools

import pytest
import torch
from devices import DEVICE
from kernel_harness import calls_with_each_set_of_tangents, spec_cases
from torch.utils._python_dispatch import TorchDispatchMode

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_PYTHON_OPERATORS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


def _operate(ext, op, a, b, temporary):
    """(dualgen's result, written into a temporary, ATen's result)."""
    got, reused = ext.temporary_operator(op, a, b, temporary)
    if op == "neg":
        expected = -a
    elif temporary == "right" and not isinstance(b, torch.Tensor):
        expected = _PYTHON_OPERATORS[op](b, a)  # a number on the left
    else:
        expected = _PYTHON_OPERATORS[op](a, b)
    return got, reused, expected


def _assert_identical(got, expected, where):
    if got.is_nested or expected.is_nested:  # (strided: component by component)
        assert got.is_nested and expected.is_nested, f"{where}: nested against dense"
        for i, (g, e) in enumerate(zip(got.unbind(), expected.unbind(), strict=True)):
            _assert_identical(g, e, f"{where}, component {i}")
        return
    assert got.dtype == expected.dtype, where
    assert got.shape == expected.shape, where
    assert got.stride() == expected.stride(), f"{where}: strides"
    assert torch.equal(got.isnan(), expected.isnan()), where
    same = got.isnan() | (got == expected)
    assert bool(same.all()), f"{where}: values"
    assert got.is_conj() == expected.is_conj(), f"{where}: lazy conjugation"
    if got.is_complex():
        got = torch.view_as_real(got.resolve_conj())
        expected = torch.view_as_real(expected.resolve_conj())
    if got.is_floating_point():  # the sign of zeros too
        assert torch.equal(got.signbit(), expected.signbit()), f"{where}: signs"


def _values(dtype, shape, layout="contiguous"):
    gen = torch.Generator(DEVICE).manual_seed(0)
    if dtype == torch.bool:
        t = torch.rand(shape, generator=gen) > 0.5
    elif dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, generator=gen, dtype=dtype)
        if t.numel():
            t.view(-1)[0] = -0.0  # signs of zeros must come out as ATen's
    else:
        t = torch.randint(-5, 6, shape, generator=gen, dtype=dtype)
    if layout == "transposed":
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    return t


_DTYPES = [torch.float32, torch.float64, torch.complex128, torch.float16, torch.int64]
_DTYPES += [torch.bool]
_SHAPES = [  # (temporary's shape and layout, other's shape and layout)
    (((3, 4), "contiguous"), ((3, 4), "contiguous")),
    (((3, 4), "contiguous"), ((3, 4), "transposed")),
    (((3, 4), "transposed"), ((3, 4), "transposed")),
    (((3, 4), "contiguous"), ((4,), "contiguous")),
    (((3, 4), "contiguous"), ((3, 1), "contiguous")),
    (((3, 1), "contiguous"), ((3, 4), "contiguous")),
    (((3, 4), "contiguous"), ((), "contiguous")),
    (((), "contiguous"), ((3, 4), "contiguous")),
    (((2, 3, 4, 5), "channels_last"), ((2, 3, 4, 5), "contiguous")),
    (((2, 3, 4, 5), "channels_last"), ((5,), "contiguous")),
    (((0, 4), "contiguous"), ((0, 4), "contiguous")),
]


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
@pytest.mark.parametrize("temporary", ["left", "right", "both"])
def test_tensor_operators_are_atens(cpp_extension, op, temporary):
    for dtype_a, dtype_b in itertools.product(_DTYPES, repeat=2):
        for (shape_a, layout_a), (shape_b, layout_b) in _SHAPES:
            a, b = _values(dtype_a, shape_a, layout_a), _values(
                dtype_b, shape_b, layout_b
            )
            where = f"{dtype_a}{list(shape_a)} {op} {dtype_b}{list(shape_b)}"
            try:
                expected = _PYTHON_OPERATORS[op](a, b)
            except RuntimeError as error:
                with pytest.raises(RuntimeError) as raised:
                    cpp_extension.temporary_operator(op, a, b, temporary)
                assert str(raised.value).splitlines()[0] == str(error).splitlines()[0]
                continue
            got, _, expected = _operate(cpp_extension, op, a, b, temporary)
            _assert_identical(got, expected, where)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
@pytest.mark.parametrize("number", [2, 0.5, -0.0, 1j, True])
def test_number_operators_are_atens(cpp_extension, op, number):
    for dtype in _DTYPES:
        a = _values(dtype, (3, 4))
        for temporary in ("left", "right"):
            if temporary == "right" and op == "/":
                continue  # `number / temp` is ATen's own operator
            where = f"{dtype} {op} {number!r} (temporary {temporary})"
            python = _PYTHON_OPERATORS[op]
            try:
                python(number, a) if temporary == "right" else python(a, number)
            except RuntimeError:  # (ATen's C++ operator may word it otherwise)
                with pytest.raises(RuntimeError):
                    cpp_extension.temporary_operator(op, a, number, temporary)
                continue
            got, _, expected = _operate(cpp_extension, op, a, number, temporary)
            _assert_identical(got, expected, where)


def test_negation_is_atens(cpp_extension):
    for dtype in [d for d in _DTYPES if d != torch.bool]:
        a = _values(dtype, (3, 4), "transposed")
        got, reused, expected = _operate(cpp_extension, "neg", a, None, "left")
        _assert_identical(got, expected, f"-{dtype}")
        assert reused, dtype


def _reused(ext, op, a, b, temporary="left"):
    return ext.temporary_operator(op, a, b, temporary)[1]


def test_writes_into_a_temporary_where_it_can(cpp_extension):
    ext = cpp_extension
    x, y = _values(torch.float32, (3, 4)), _values(torch.float32, (3, 4)) + 1
    assert _reused(ext, "*", x, y, "left") and _reused(ext, "*", x, y, "right")
    assert _reused(ext, "/", x, y, "left") and not _reused(ext, "/", x, y, "right")
    assert _reused(ext, "-", x, 1.0, "right")  # 1 - temp
    assert _reused(ext, "+", x, torch.randn(4), "left")  # a bias broadcast in
    assert _reused(ext, "*", x, torch.tensor(2.0, dtype=torch.float64), "left")


def test_leaves_a_temporary_alone_where_it_must(cpp_extension):
    ext = cpp_extension
    x = _values(torch.float32, (3, 4))
    # the result is another dtype, another size or another layout
    assert not _reused(ext, "*", x, x.double(), "left")
    assert not _reused(ext, "*", x, torch.randn(5, 3, 4), "left")
    assert not _reused(ext, "*", x, _values(torch.float32, (3, 4), "transposed"))
    assert not _reused(ext, "+", x, torch.randn(4), "right")  # other lays it out
    assert not _reused(ext, "/", x.long(), x.long(), "left")  # true division
    assert not _reused(ext, "*", x, 0.5j, "left")
    ints = x.long()
    assert not _reused(ext, "*", ints, 0.5, "left")
    # the commuted complex product rounds its cross terms in another order
    z = _values(torch.complex128, (3, 4))
    assert _reused(ext, "*", z, z, "left") and not _reused(ext, "*", z, z, "right")
    # lazy values, autograd, a Python mode
    assert not _reused(ext, "*", z.conj(), z, "left")
    grad = x.clone().requires_grad_()
    assert not _reused(ext, "*", grad, x, "left")
    assert not _reused(ext, "*", x, grad, "left")
    with torch.no_grad():
        assert _reused(ext, "*", grad, x, "left")
    with _Log() as log:  # a mode sees ATen's out-of-place operator
        assert not _reused(ext, "*", x, x, "left")
    assert "aten.mul.Tensor" in log.ops and "aten.mul_.Tensor" not in log.ops


class _Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_off_means_atens_operators(cpp_extension):
    x = _values(torch.float32, (3, 4))
    cpp_extension.set_temporaries_reuse(False)
    try:
        assert not _reused(cpp_extension, "*", x, x, "left")
    finally:
        cpp_extension.set_temporaries_reuse(True)
    assert cpp_extension.temporaries_reuse()


def _cases():
    runnable, _ = spec_cases()
    return [pytest.param(c, id=c.id) for c in runnable]


@pytest.mark.parametrize("kernel_case", _cases())
def test_kernel_tangents_identical_with_and_without_reuse(kernel_case, cpp_extension):
    info = kernel_case.info
    for present, primals, outputs, fresh in calls_with_each_set_of_tangents(
        kernel_case
    ):
        results = []
        for reuse in (True, False):
            tangents = fresh()
            cpp_extension.set_temporaries_reuse(reuse)
            try:
                got = cpp_extension.call_jvp(
                    info.cpp_kernel, primals, tangents, outputs
                )
            finally:
                cpp_extension.set_temporaries_reuse(True)
            results.append((got, tangents))
        where = f"{info.name} {kernel_case.dtype}, tangents of {list(present)}"
        _assert_same_tree(results[0], results[1], where)


def _assert_same_tree(got, expected, where):
    if isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same_tree(g, e, f"{where}[{i}]")
        return
    assert (got is None) == (expected is None), where
    if isinstance(expected, torch.Tensor):
        _assert_identical(got, expected, where)


@pytest.mark.parametrize("vmap", ["legacy", "functorch"])
def test_a_batched_operand_is_left_to_aten(cpp_extension, vmap):
    from torch._vmap_internals import _vmap

    x, ys = _values(torch.float32, (3,)), torch.randn(5, 3)
    vmapped = _vmap if vmap == "legacy" else torch.vmap
    for temporary in ("left", "right", "both"):
        got = vmapped(
            lambda y, t=temporary: cpp_extension.temporary_operator("*", x, y, t)[0]
        )(ys)
        assert torch.equal(got, x * ys), temporary
