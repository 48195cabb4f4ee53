"""Outputs whose formulas index one call share it (tools/analyse/shared.py): the
kernel makes the call once. Only the same call, with the same arguments, under
the same conditions is shared; anything else keeps a call per output."""

from __future__ import annotations

import pytest

from dualgen.tools.cli import generate_files

SLOGDET = "_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)"
BACKWARD = "slogdet_grad(grad_sign, grad_logabsdet, A, sign, LU, pivots)"


def _kernel(tmp_path, sign: str, logabsdet: str) -> tuple[str, str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"- name: {SLOGDET}\n"
        f"  A: {BACKWARD}\n"
        f"  sign: {sign}\n"
        f"  logabsdet: {logabsdet}\n"
        "  output_differentiability: [true, true, false, false]\n",
        encoding="utf-8",
    )
    files = generate_files(spec).files
    python = files["jvp.py"].split("def _linalg_slogdet_default")[1]
    cpp = next(
        text.split("_linalg_slogdet_default")[1]
        for name, text in files.items()
        if name.startswith("cpp/jvp_") and "_linalg_slogdet_default" in text
    )
    return python, cpp


def test_one_call_indexed_by_two_outputs_runs_once(tmp_path):
    python, cpp = _kernel(
        tmp_path,
        "slogdet_tangents(A_t, A_p, sign)[0]",
        "slogdet_tangents(A_t, A_p, sign)[1]",
    )
    assert python.count("slogdet_tangents(A_t, A_p, sign)\n") == 1
    assert "sign_t = shared_tangents[0]" in python
    assert "logabsdet_t = shared_tangents[1]" in python
    assert cpp.count("= slogdet_tangents(A_t, A_p, sign);") == 1


@pytest.mark.parametrize(
    "sign, logabsdet",
    [
        # other arguments: two values, two calls
        ("slogdet_tangents(A_t, A_p, sign)[0]", "slogdet_tangents(A_t, A_p, LU)[1]"),
        # one output's formula does more than index the call
        (
            "slogdet_tangents(A_t, A_p, sign)[0]",
            "slogdet_tangents(A_t, A_p, sign)[1] * 2",
        ),
        # the same index: two outputs would hold one tangent object
        ("slogdet_tangents(A_t, A_p, sign)[0]", "slogdet_tangents(A_t, A_p, sign)[0]"),
    ],
)
def test_anything_else_keeps_a_call_per_output(tmp_path, sign, logabsdet):
    python, cpp = _kernel(tmp_path, sign, logabsdet)
    assert "shared_tangents" not in python
    assert "shared_tangents" not in cpp
    assert python.count("slogdet_tangents(") == 2 * 2  # in the comments, in the code
