"""The real-model suite: every model of `families.py`, in eval and train mode,
float32 and float64, with tangents on its inputs and on every parameter.

dualgen must give a tangent everywhere the model's plain forward runs, equal to
native forward AD's where native runs (at the defaults, else with attention by
its definition), and to finite differences of the model in float64; its output
must be the plain forward's (dropout: the same mask from the same seed).
`python -m tests.models.table` prints which systems pass and their speed.
"""

from __future__ import annotations

import pytest
import torch

from .check import (
    AGAINST_FD,
    SAME_DTYPE,
    Case,
    error_against_fd,
    plain_forward,
    reference,
    relative_error,
    run,
)
from .families import FAMILIES, HAS_TRANSFORMERS


def cases():
    for family in FAMILIES:
        dtypes = (torch.float32, torch.float64) if family.float64 else (torch.float32,)
        marks = []
        if family.needs_transformers and not HAS_TRANSFORMERS:
            marks.append(
                pytest.mark.skip(reason="needs transformers (the models extra)")
            )
        for mode in family.modes:
            for dtype in dtypes:
                for on in family.on:
                    case = Case(family, mode, dtype, on)
                    yield pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", list(cases()))
def test_dualgen_jvp_of_a_real_model(case: Case):
    try:
        plain = plain_forward(case)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"the model's plain forward fails: {exc}")
    ours = run(case, "dualgen")
    assert ours.error is None, ours.error
    tolerance = SAME_DTYPE[case.dtype]
    assert (
        relative_error(ours.primal, plain) <= tolerance
    ), "the output is not the plain forward's"
    assert (
        ours.tangent.norm() > 1e-6
    ), "a vanishing tangent proves nothing: change the case"
    name, native = reference(case)
    if native.error is None:
        error = relative_error(ours.tangent, native.tangent)
        assert error <= tolerance, f"{error:.2e} from {name}"
    else:  # native fails even with attention by its definition
        assert case.family.has_finite_differences, f"no reference: {native.error}"
        error = error_against_fd(case, ours.tangent)
        assert error <= AGAINST_FD, f"{error:.2e} from finite differences"
