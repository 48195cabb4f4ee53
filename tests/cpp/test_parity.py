"""Every C++ kernel against its Python twin, for every set of present tangents,
on the kernel samples (the spec's `sample:` lines) in float64 and complex128.

Both run on the same primals, outputs and tangents; their output tangents (and,
for kernels that update `self_t` in place, the tangents they were given) must
agree in presence, shape and dtype, and in value to 1e-12 relative (bit for bit
wherever the same aten calls run, which is almost everywhere).
"""

from __future__ import annotations

import pytest
from kernel_harness import (
    as_tuple,
    assert_matches,
    calls_with_each_set_of_tangents,
    spec_cases,
)

from dualgen.generated.registry import KERNELS
from dualgen.kernel_info import has_overload

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _cases():
    runnable, _ = spec_cases()
    return [pytest.param(c, id=c.id) for c in runnable]


def test_every_kernel_has_a_cpp_twin(cpp_extension):
    names = set(cpp_extension.kernel_names())
    missing = [i.name for i in KERNELS.values() if i.cpp_kernel not in names]
    assert not missing, f"kernels without a C++ twin: {missing}"
    # The C++ registry names every kernel; the Python one registers those of an
    # entry's `torch_releases` only where the installed torch has the overload.
    extra = {
        name for name in names if name not in {i.cpp_kernel for i in KERNELS.values()}
    }
    for name in extra:
        packet, _, overload = name.removeprefix("aten::").partition(".")
        assert not has_overload(packet, overload), name
    assert len(names) - len(extra) == len(KERNELS)


@pytest.mark.parametrize("kernel_case", _cases())
def test_cpp_kernel_matches_python_kernel(kernel_case, cpp_extension):
    op, info = kernel_case.op, kernel_case.info
    for present, primals, outputs, tangents in calls_with_each_set_of_tangents(
        kernel_case
    ):
        py_tangents, cpp_tangents = tangents(), tangents()
        expected = _results(op, info.jvp(*primals, *py_tangents, *outputs))
        got = cpp_extension.call_jvp(info.cpp_kernel, primals, cpp_tangents, outputs)
        where = f"{info.name} {kernel_case.dtype}, tangents of {list(present)}"
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, f"{where}, output {i}")
        for name, g, e in zip(info.differentiable_inputs, cpp_tangents, py_tangents):
            _assert_same(g, e, f"{where}, {name}_t after the kernel")


def _results(op, value) -> tuple:
    if len(op._schema.returns) == 1:
        return (value,)
    return as_tuple(value)


def _assert_same(got, expected, where):
    if isinstance(expected, (list, tuple)) or isinstance(got, (list, tuple)):
        assert isinstance(got, (list, tuple)) and isinstance(
            expected, (list, tuple)
        ), f"{where}: {type(got).__name__} against {type(expected).__name__}"
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, f"{where}[{i}]")
        return
    assert (got is None) == (expected is None), f"{where}: {got!r} against {expected!r}"
    if expected is None:
        return
    assert_matches(got, expected, where, rtol=1e-12, atol=1e-12)
