"""Outputs that forward formulas read, and that carry no tangent, must not move.

A forward formula may read the op's outputs (`result1`, `LU`, `indices`). At an
outer level (forward over forward, or the backward formulas under forward over
reverse) an output without a tangent of its own is a constant: if it moves with the
differentiable inputs (a saved mean, rstd or LU factorization), second derivatives
miss its share, silently. So every output a forward formula reads without a
tangent must be locally constant: integer or boolean (indices, pivots, masks), or
unmoved when the inputs move (a permutation matrix, statistics of non-differentiable
running buffers). This holds it, for every entry, on the spec's samples: the op
runs at its inputs and at inputs moved along a random direction.
"""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE
from kernel_harness import SPEC_PATH, call, clone_tree, outputs_of

import dualgen.forward_ad as fwAD
from dualgen.generated.registry import KERNELS
from dualgen.tools.check.formula import names_used
from dualgen.tools.cli import checked_spec
from dualgen.tools.validate import kernels_by_entry, samples_of, seed_of
from dualgen.tools.validate.inputs import cases_for

STEP = 1e-4  # a moving output changes by about this much

# Entries whose formulas pass a moving output only to an op that has no forward
# rule of its own: at an outer level that op raises (no rule), never a wrong value.
# Each claim is held by test_exempt_entries_raise_when_nested.
RAISES_WHEN_NESTED = {
    "_ctc_loss": "result1 (log_alpha) goes to _ctc_loss_backward, which has no rule",
    "_ctc_loss.Tensor": "result1 (log_alpha) goes to _ctc_loss_backward, which has no rule",
}


def _read_without_tangent(entry) -> set[str]:
    """The outputs the entry's forward formulas read that carry no tangent."""
    outputs = entry.schema.output_names()
    without = {n for n, d in zip(outputs, entry.output_differentiability) if not d}
    read = set()
    for f in entry.forward:
        if f.formula is not None:
            read |= names_used(f.formula.tree) & without
    return read


def _entries():
    spec, _ = checked_spec(SPEC_PATH)
    params = []
    for entry, op, info in kernels_by_entry(spec, KERNELS):
        read = _read_without_tangent(entry)
        if read and entry.schema.full_name not in RAISES_WHEN_NESTED:
            params.append(
                pytest.param(spec, entry, op, info, read, id=entry.schema.full_name)
            )
    return params


def _moved(values: dict, names, generator) -> dict:
    moved = clone_tree(values)
    for name in names:
        v = moved[name]
        items = v if isinstance(v, list) else [v]
        for i, t in enumerate(items):
            if isinstance(t, torch.Tensor) and (
                t.is_floating_point() or t.is_complex()
            ):
                step = torch.randn(t.shape, generator=generator, dtype=torch.float64)
                items[i] = t + STEP * step.to(t.dtype)
        if not isinstance(v, list):
            moved[name] = items[0]
    return moved


def moving_outputs(op, info, read: set[str], values: dict, generator) -> list[str]:
    """The outputs in `read` that change when the differentiable inputs move."""
    names = info.outputs
    before = outputs_of(op, call(op, clone_tree(values)))
    moved = _moved(values, info.differentiable_inputs, generator)
    after = outputs_of(op, call(op, moved))
    moving = []
    for name, b, a in zip(names, before, after):
        if name not in read or not isinstance(b, torch.Tensor):
            continue
        if not (b.is_floating_point() or b.is_complex()) or b.shape != a.shape:
            continue
        tolerance = 1e-9 if b.dtype in (torch.float64, torch.complex128) else 1e-6
        if not torch.allclose(a, b, rtol=tolerance, atol=tolerance, equal_nan=True):
            moving.append(name)
    return moving


@pytest.mark.parametrize("spec, entry, op, info, read", _entries())
def test_outputs_read_without_a_tangent_are_constant(spec, entry, op, info, read):
    generator = torch.Generator(DEVICE).manual_seed(seed_of(info))
    checked = 0
    cases = [
        case
        for dtype in (torch.float64, torch.float32)  # float32: ops without doubles
        for case in cases_for(
            op, samples_of(spec, entry, op), dtype, seed_of(info), device=DEVICE
        )
    ]
    for case in cases:
        if case.refusal:
            continue
        values = dict(case.values)
        try:
            moving = moving_outputs(op, info, read, values, generator)
        except Exception:  # noqa: BLE001, S112 (torch refuses it: validate says so)
            continue
        checked += 1
        assert not moving, (
            f"{entry.schema.full_name} (derivatives.yaml:{entry.location.line}): its "
            f"forward formulas read {moving}, which move with the inputs but carry "
            "no tangent: at an outer level they are constants and second "
            "derivatives miss their share. Give them forward formulas (and their "
            "gradients to the backward formula), or do not read them."
        )
    assert checked, f"no sample of {entry.schema.full_name} runs"


def test_a_moving_output_without_a_tangent_is_caught():
    """The check itself: LU of _linalg_solve_ex moves with A (a constant would be
    wrong), while its pivots do not."""
    op = torch.ops.aten._linalg_solve_ex.default
    info = KERNELS[op]
    A = torch.randn(3, 3, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64)
    values = {"A": A, "B": torch.randn(3, 2, dtype=torch.float64), "left": True}
    values["check_errors"] = False
    generator = torch.Generator(DEVICE).manual_seed(0)
    assert moving_outputs(op, info, {"LU", "pivots"}, values, generator) == ["LU"]


def test_exempt_entries_raise_when_nested():
    log_probs = torch.randn(6, 2, 4, dtype=torch.float64).log_softmax(-1)
    targets = torch.tensor([[1, 2, 2], [1, 3, 0]])

    def f(x):
        return torch.nn.functional.ctc_loss(x, targets, [6, 5], [3, 2])

    with fwAD.dual_level():
        outer = fwAD.make_dual(log_probs, torch.randn_like(log_probs))
        inner = fwAD.dual_level()
        with inner, pytest.raises(NotImplementedError, match="_ctc_loss_backward"):
            f(fwAD.make_dual(outer, torch.randn_like(log_probs)))
