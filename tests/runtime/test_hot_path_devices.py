"""Tensors off the CPU through the hot path, on a machine without a device.

Meta tensors (a device with no memory and no values) stand in for one: the front
kernel takes CPU tensors only and declines them, and the mode offers them to the
hot path, which must handle them as it handles CPU tensors or decline them, never
put a tangent on another device. Each program of test_hot_path.py runs on meta
duals under both backends: every tangent is a meta tensor with the shape, strides
and dtype the CPU run gives it, and the C++ backend declines none of the ops it
handles on the CPU (in-place updates, operands sharing self's memory, copy_, list
inputs and outputs).
"""

from __future__ import annotations

import pytest
import torch
from test_hot_path import PROGRAMS, declined_ops

import dualgen.forward_ad as fwAD

F64 = torch.float64


def _tangent_meta(device: str, program) -> tuple:
    """The program on duals of `device` (its tensors made there too): the
    device, shape, strides and dtype of the result and of its tangent."""
    values = [torch.randn(4, 6, dtype=F64, device=device) for _ in range(4)]
    x, tx, w, tw = values
    with fwAD.dual_level(), torch.device(device):
        out = program(fwAD.make_dual(x.clone(), tx), fwAD.make_dual(w.clone(), tw))
        primal, tangent = fwAD.unpack_dual(out)
    assert tangent is not None
    return tuple(
        (t.device.type, tuple(t.shape), t.stride(), t.dtype) for t in (primal, tangent)
    )


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_meta_duals_get_meta_tangents_laid_out_as_on_cpu(backend, name):
    program, ops = PROGRAMS[name]
    expected = _tangent_meta("cpu", program)
    with declined_ops() as declined:
        got = _tangent_meta("meta", program)
    assert [meta[0] for meta in got] == ["meta", "meta"]
    assert [meta[1:] for meta in got] == [meta[1:] for meta in expected]
    if backend == "cpp":
        assert not ops & set(declined), f"declined: {sorted(ops & set(declined))}"


def test_a_meta_dual_through_functional_and_in_place_ops(backend):
    primal, direction = (torch.randn(3, 4, device="meta") for _ in range(2))
    with fwAD.dual_level():
        a = fwAD.make_dual(primal, direction)
        y = (a.sin() * a).t().matmul(a).sum(0)
        a.add_(1.0).mul_(a)
        for t in (y, a):
            tangent = fwAD.unpack_dual(t).tangent
            assert tangent.device.type == "meta"
            assert tangent.shape == t.shape and tangent.dtype == t.dtype


def test_formulas_make_their_constants_on_the_primals_device(backend):
    # householder_product's tangent builds identity matrices: on the primal's
    # device, or the meta tensors meet a CPU one.
    input, input_t = (torch.randn(4, 3, dtype=F64, device="meta") for _ in range(2))
    tau, tau_t = (torch.randn(2, dtype=F64, device="meta") for _ in range(2))
    with fwAD.dual_level():
        q = torch.linalg.householder_product(
            fwAD.make_dual(input, input_t), fwAD.make_dual(tau, tau_t)
        )
        tangent = fwAD.unpack_dual(q).tangent
    assert tangent.device.type == "meta" and tangent.shape == (4, 3)


def test_det_of_a_meta_dual(backend):
    """det's tangent helper counts the LU's row swaps against positions made on
    the pivots' device (it made them on the CPU)."""
    primal, direction = (torch.randn(2, 3, 3, device="meta") for _ in range(2))
    with fwAD.dual_level():
        out = torch.linalg.det(fwAD.make_dual(primal, direction))
        tangent = fwAD.unpack_dual(out).tangent
    assert tangent.device.type == "meta" and tangent.shape == (2,)
