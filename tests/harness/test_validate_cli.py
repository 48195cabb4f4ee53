"""`dualgen validate` from the command line: exit status, `FAIL` lines with their
spec lines, the Markdown and HTML reports, `-v`, `--ops` (and its suggestions for
unknown names), `--spec` and spec errors, the harness's own entries; and the gauge
invariants that the outputs of decompositions are compared by.

Each test writes a small spec (validate_checks.py) to derivatives.yaml in a
temporary directory and runs `dualgen validate` there, so the default `--spec` is
exercised too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from validate_checks import (
    DTYPES,
    FIRST_ORDER,
    FIRST_ORDER_COLUMNS,
    GOOD,
    GOOD_KERNELS,
    HARNESS,
    JET_COLUMNS,
    MUL,
    MUL_BW,
    SIN,
    SIN_BW,
    entry,
    line_of,
    table,
    validate,
    validate_failing,
)

from dualgen.tools.cli import main

# ---------------------------------------------------------------- a correct spec


def test_correct_spec_passes_and_writes_both_reports(tmp_path, monkeypatch, capsys):
    rc = validate(tmp_path, monkeypatch, GOOD, "--report", "out/report")
    out, err = capsys.readouterr()
    assert rc == 0, out
    assert err == ""  # --no-progress: no progress bar
    assert "FAIL" not in out
    assert "11 kernels: 11 pass, 0 fail, 0 have no derivatives to check" in out
    md, page = tmp_path / "out/report.md", tmp_path / "out/report.html"
    assert f"report: {Path('out/report.md')}, {Path('out/report.html')}" in out

    rows = table(md)
    assert [(k, r["kind"]) for k, r in rows.items()] == GOOD_KERNELS
    for kernel, row in rows.items():
        assert [row[c] for c in FIRST_ORDER_COLUMNS] == ["pass"] * 6, kernel
        assert {row[c] for c in JET_COLUMNS} <= {"pass", "n/a"}, kernel
        assert row["error"] == ""
    assert rows["sin"]["line"] == str(line_of(GOOD, SIN))
    assert rows["sin_"]["line"] == rows["sin"]["line"]
    assert "in-place, derived from mul.Tensor" in rows["mul_.Tensor"]["formulas"]
    assert "result = auto_element_wise" in rows["sin"]["formulas"]
    assert "view of the tangent" in rows["view"]["formulas"]

    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert html.rstrip().endswith("</html>")
    assert "<table>" in html and "</table>" in html
    assert "<style>" in html and "<script" not in html and "<link" not in html
    assert html.count("<tr>") == 1 + len(GOOD_KERNELS)
    assert html.count('class="pass"') >= 6 * len(GOOD_KERNELS)
    assert 'class="fail"' not in html
    for kernel, _ in GOOD_KERNELS:
        assert f"<code>{kernel}</code>" in html


# ---------------------------------------------------------------- wrong formulas


@pytest.mark.parametrize(
    "backward, forward, wrong, right",
    [
        (
            "self: grad * self.sin().conj()",
            "result: self_t * self_p.cos()",
            "backward",
            "forward",
        ),
        (SIN_BW, "result: self_t * self_p.sin()", "forward", "backward"),
    ],
    ids=["wrong_backward", "wrong_forward"],
)
def test_wrong_formula_fails_every_check_in_both_dtypes(
    tmp_path, monkeypatch, capsys, backward, forward, wrong, right
):
    spec = HARNESS + entry(SIN, backward, forward)
    out, found = validate_failing(
        tmp_path, monkeypatch, capsys, spec, "--ops", "sin", "--report", "r"
    )
    expected = {(k, d, c) for k in ("sin", "sin_") for d in DTYPES for c in FIRST_ORDER}
    assert set(found) == expected
    # Without -v, one line per failure: nothing but FAIL lines and the summary.
    for line in out.splitlines():
        assert line.startswith(("FAIL ", "2 kernels: ", "report: ")), line
    assert "2 kernels: 0 pass, 2 fail, 0 have no derivatives to check" in out
    for (kernel, dtype, check), (spec_line, detail) in found.items():
        assert spec_line == line_of(spec, SIN)
        assert detail.startswith("sample, 2-d: ")
        assert re.search(rf" in {re.escape(kernel)}(:|$)", detail)
        if check == "adjoint":
            # The forward formula disagrees with the backward formula.
            assert "the forward and backward formulas disagree" in detail
        else:
            # torch's words (slow and fast alike), then the mode and the kernel.
            jacobian = (
                "Jacobian computed with forward mode"
                if wrong == "forward"
                else "Jacobian"
            )
            mismatch = f"{jacobian} mismatch for output 0 with respect to input 0, "
            # Complex values: torch's prefix, naming a part of the outputs
            # (backward mode) or of the inputs (forward mode).
            start = "While considering the " if dtype == "complex128" else mismatch
            assert detail.startswith(f"sample, 2-d: {start}")
            assert f"{mismatch}{wrong} mode, in {kernel}" in detail
            assert f"{right} mode" not in detail
        if dtype == "complex128":
            assert re.search(r"(real|imaginary) part", detail)

    rows = table(tmp_path / "r.md")
    assert list(rows) == ["sin", "sin_"]
    for kernel, row in rows.items():
        assert [row[c] for c in FIRST_ORDER_COLUMNS] == ["FAIL"] * 6
        assert row["error"] == (
            f"float64 slow: {found[(kernel, 'float64', 'slow')][1]}"
        )
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="fail"') == 12
    assert "<pre>float64 slow: sample, 2-d: Jacobian " in html
    assert f"{wrong} mode, in sin_" in html


def test_missing_conj_fails_only_complex_and_adjoint_cannot_see_it(
    tmp_path, monkeypatch, capsys
):
    # auto_element_wise derives the forward formula from the backward one, so
    # the two agree (adjoint passes) while both are wrong for complex inputs.
    spec = HARNESS + entry(SIN, "self: grad * self.cos()", "result: auto_element_wise")
    _, found = validate_failing(tmp_path, monkeypatch, capsys, spec, "--ops", "sin")
    assert set(found) == {
        (k, "complex128", c) for k in ("sin", "sin_") for c in ("slow", "fast")
    }


def test_verbose_prints_each_failure_in_full(tmp_path, monkeypatch, capsys):
    spec = HARNESS + entry(SIN, SIN_BW, "result: self_t * self_p.sin()")
    out, _ = validate_failing(
        tmp_path, monkeypatch, capsys, spec, "--ops", "sin_", "-v"
    )
    assert "FAIL sin_ [float64 slow]" in out
    assert "  numerical: " in out and "  analytical: " in out
    assert "worst element: input 0[" in out


def test_crashing_formula_and_refused_samples_fail(tmp_path, monkeypatch, capsys):
    spec = (
        HARNESS
        + entry(SIN, "self: grad.reshape(5, 7)", "result: auto_element_wise")
        + entry(
            MUL,
            "sample: self=any(2, 3), other=any(4, 5)",
            *MUL_BW,
            "result: self_t * other_p + other_t * self_p",
        )
    )
    out, found = validate_failing(
        tmp_path, monkeypatch, capsys, spec, "--ops", "sin", "mul.Tensor"
    )
    kernels = ("sin", "sin_", "mul.Tensor", "mul_.Tensor")
    assert {f for f in found if f[2] != "jet"} == {
        (k, d, c) for k in kernels for d in DTYPES for c in (*FIRST_ORDER, "reverse")
    }
    crash = found[("sin", "complex128", "adjoint")][1]
    assert crash.startswith("sample, 2-d: RuntimeError: shape '[5, 7]' is invalid")
    # A kernel that no sample reaches is not validated: a failure, not n/a.
    refused = found[("mul_.Tensor", "float64", "fast")][1]
    assert refused.startswith("no sample runs: sample: torch refuses: RuntimeError:")
    assert "4 kernels: 0 pass, 4 fail" in out


# ---------------------------------------------------------------- --ops


def test_ops_selects_kernels_and_entries(tmp_path, monkeypatch, capsys):
    rc = validate(
        tmp_path, monkeypatch, GOOD, "--ops", "sin_", "mul.Tensor", "--report", "r"
    )
    out, _ = capsys.readouterr()
    assert rc == 0, out
    # A kernel name picks that kernel; an entry name every kernel of the entry.
    assert list(table(tmp_path / "r.md")) == ["sin_", "mul.Tensor", "mul_.Tensor"]
    assert "3 kernels: 3 pass, 0 fail" in out


def test_unknown_ops_name_exits_2(tmp_path, monkeypatch, capsys):
    rc = validate(tmp_path, monkeypatch, GOOD, "--ops", "sin", "nosuch", "exp.Bad")
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.strip().splitlines()[-2:] == [
        "no kernel or entry named 'exp.Bad'; did you mean 'exp'?",
        "no kernel or entry named 'nosuch'",
    ]
    assert "FAIL" not in out


@pytest.mark.parametrize(
    "name, meant",
    [
        ("mull", "mul.Tensor"),  # the base before the dot first
        ("mul.Tensr", "mul.Tensor"),
        ("mul_.Tensr", "mul_.Tensor"),  # not the functional, though as close
        ("sinn", "sin"),
        ("lgo", "log"),  # a swap of neighbours is one typo
    ],
)
def test_unknown_ops_name_suggests_the_closest(
    tmp_path, monkeypatch, capsys, name, meant
):
    assert validate(tmp_path, monkeypatch, GOOD, "--ops", name) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"no kernel or entry named '{name}'; did you mean '{meant}'?"
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        (None, "derivatives.yaml: error: cannot read spec: No such file or directory"),
        (
            HARNESS
            + entry(
                SIN, "self: grad * self.nonexistent()", "result: auto_element_wise"
            ),
            "error: sin: self: Tensor has no attribute 'nonexistent'",
        ),
    ],
    ids=["missing_spec", "spec_error"],
)
def test_spec_errors_exit_1_before_validating(
    tmp_path, monkeypatch, capsys, spec, message
):
    monkeypatch.chdir(tmp_path)
    if spec is not None:
        Path("derivatives.yaml").write_text(spec)
    rc = main(
        ["validate", "--spec", "derivatives.yaml", "--no-progress", "--report", "r"]
    )
    out, err = capsys.readouterr()
    assert rc == 1
    assert out == ""
    assert message in err
    assert not (tmp_path / "r.md").exists()


# ---------------------------------------------------------------- --spec


def test_a_spec_of_the_users_entries_alone_validates(tmp_path, monkeypatch, capsys):
    # The harness's own alias and clone come from the built-in kernels.
    monkeypatch.chdir(tmp_path)
    Path("my.yaml").write_text(entry(SIN, SIN_BW, "result: auto_element_wise"))
    rc = main(["validate", "--spec", "my.yaml", "--no-progress", "--report", "r"])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert list(table(tmp_path / "r.md")) == ["sin", "sin_"]
    assert "2 kernels: 2 pass, 0 fail" in out


def test_the_specs_own_harness_entries_are_the_ones_checked(
    tmp_path, monkeypatch, capsys
):
    broken_clone = entry(
        "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
        "self: grad",
        "result: 2 * self_t",
    )
    spec = entry(SIN, SIN_BW, "result: auto_element_wise") + broken_clone
    _, found = validate_failing(tmp_path, monkeypatch, capsys, spec, "--ops", "clone")
    assert ("clone", "float64", "slow") in found


# ---------------------------------------------------------------- gauge invariants


def test_gauge_invariants_ignore_the_phase_of_each_vector():
    from dualgen.tools.validate.checked_function import GAUGE_INVARIANTS

    A = torch.randn(4, 3, dtype=torch.complex128)
    phase = torch.exp(1j * torch.randn(3, dtype=torch.float64))
    U, S, Vh = torch.linalg.svd(A, full_matrices=True)
    turned = torch.cat([U[:, :3] * phase, -U[:, 3:]], -1), S, Vh * phase.conj()[:, None]
    svd = GAUGE_INVARIANTS["_linalg_svd"]
    for a, b in zip(svd((U, S, Vh)), svd(turned)):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close((svd((U, S, Vh))[1] * S).sum(-1), A)
    L, V = torch.linalg.eig(A[:3])
    eig = GAUGE_INVARIANTS["linalg_eig"]
    for a, b in zip(eig((L, V)), eig((L, V * phase))):
        torch.testing.assert_close(a, b)


# ---------------------------------------------------------------- samples torch refuses


def test_a_sample_torch_refuses_in_every_dtype_fails_the_kernel(
    tmp_path, monkeypatch, capsys
):
    """A sample the op never takes (shapes that do not broadcast) checks nothing:
    the kernel fails naming it, rather than pass on its other samples."""
    mul = entry(
        MUL,
        "sample:",
        "  - self=any(3, 4), other=any(3, 4)",
        "  - self=any(3, 4), other=any(5)",
        *MUL_BW,
        "result: self_t * other_p + other_t * self_p",
    )
    out, found = validate_failing(
        tmp_path, monkeypatch, capsys, HARNESS + mul, "--ops", "mul.Tensor"
    )
    assert ("mul.Tensor", "float64", "slow") in found
    assert "sample 2: torch refuses it in every dtype" in out
