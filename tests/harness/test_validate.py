"""`dualgen validate`: every kernel of a spec through gradcheck and the adjoint
check, on the inputs its `sample:` declarations describe.

The command-line tests write a small spec (the harness's own `alias` and `clone`
entries plus the entries under test) to derivatives.yaml in a temporary directory
and run `dualgen validate` there, so the default `--spec` is exercised too. The
last tests check tools/inputs.py (the sample values) directly.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from dualgen.tools.cli import main
from dualgen.tools.inputs import cases_for
from dualgen.tools.sample import (
    DtypeName,
    Sample,
    TensorListSample,
    TensorSample,
    parse_sample,
)
from dualgen.tools.sandbox_dir import FilesWritten, empty_cwd

REPO = Path(__file__).resolve().parents[2]
aten = torch.ops.aten

DTYPES = ("float64", "complex128")
CHECKS = ("slow", "fast", "adjoint")
COLUMNS = [f"{d} {c}" for d in DTYPES for c in CHECKS]


def entry(name: str, *lines: str) -> str:
    """One spec entry: `- name: <name>` then its other keys, one per line."""
    return f"- name: {name}\n" + "".join(f"  {line}\n" for line in lines) + "\n"


# The harness calls these itself (see derivatives.yaml): every test spec has them.
HARNESS = entry("alias(Tensor(a) self) -> Tensor(a)", "self: grad") + entry(
    "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    "self: grad",
    "result: auto_linear",
)
SIN = "sin(Tensor self) -> Tensor"
EXP = "exp(Tensor self) -> Tensor"
LOG = "log(Tensor self) -> Tensor"
MUL = "mul.Tensor(Tensor self, Tensor other) -> Tensor"
VIEW = "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
SIN_BW = "self: grad * self.cos().conj()"
MUL_BW = (
    "self: unbroadcast(grad * other.conj(), self)",
    "other: unbroadcast(grad * self.conj(), other)",
)
LOG_BW = "self: grad / self.conj()"

GOOD = (
    entry(SIN, SIN_BW, "result: auto_element_wise")
    + entry(EXP, "self: grad * result.conj()", "result: self_t * result")
    + entry(MUL, *MUL_BW, "result: self_t * other_p + other_t * self_p")
    + entry(LOG, "sample: self=positive", LOG_BW, "result: auto_element_wise")
    + entry(
        VIEW, "sample: self=any(3, 4), size=[4, 3]", "self: grad.reshape(self.shape)"
    )
    + HARNESS
)
GOOD_KERNELS = [
    ("sin", "functional"),
    ("sin_", "inplace"),
    ("exp", "functional"),
    ("exp_", "inplace"),
    ("mul.Tensor", "functional"),
    ("mul_.Tensor", "inplace"),
    ("log", "functional"),
    ("log_", "inplace"),
    ("view", "view"),
    ("alias", "view"),
    ("clone", "functional"),
]

FAIL_LINE = re.compile(r"FAIL (\S+) \[(\S+) (\S+)\] \(spec line (\d+)\): (.*)")


def validate(tmp_path: Path, monkeypatch, spec: str, *args: str) -> int:
    monkeypatch.chdir(tmp_path)
    Path("derivatives.yaml").write_text(spec)
    return main(["validate", "--no-progress", *args])


def line_of(spec: str, name: str) -> int:
    """The spec line of the entry `name`."""
    lines = spec.splitlines()
    return lines.index(f"- name: {name}") + 1


def failures(out: str) -> dict[tuple[str, str, str], tuple[int, str]]:
    """(kernel, dtype, check) -> (spec line, detail) for each FAIL line."""
    found = {}
    for line in out.splitlines():
        m = FAIL_LINE.fullmatch(line)
        if m:
            kernel, dtype, check, spec_line, detail = m.groups()
            found[(kernel, dtype, check)] = (int(spec_line), detail)
    return found


def table(path: Path) -> dict[str, dict[str, str]]:
    """The Markdown report as kernel -> {column: cell}, in row order."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header, *rows = [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines
    ]
    return {row[0].strip("`"): dict(zip(header, row, strict=True)) for row in rows}


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
        assert [row[c] for c in COLUMNS] == ["pass"] * 6, kernel
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
    assert html.count('class="pass"') == 6 * len(GOOD_KERNELS)
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
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    expected = {(k, d, c) for k in ("sin", "sin_") for d in DTYPES for c in CHECKS}
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
            kind = "Fast gradcheck" if check == "fast" else "Jacobian"
            assert detail.startswith(f"sample, 2-d: {kind} mismatch")
            assert f"{wrong} mode" in detail and f"{right} mode" not in detail
        if dtype == "complex128":
            assert "(real part)" in detail

    rows = table(tmp_path / "r.md")
    assert list(rows) == ["sin", "sin_"]
    for kernel, row in rows.items():
        assert [row[c] for c in COLUMNS] == ["FAIL"] * 6
        assert row["error"] == (
            f"float64 slow: {found[(kernel, 'float64', 'slow')][1]}"
        )
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="fail"') == 12
    assert "<pre>float64 slow: sample, 2-d: Jacobian mismatch" in html
    assert f"{wrong} mode, in sin_" in html


def test_missing_conj_fails_only_complex_and_adjoint_cannot_see_it(
    tmp_path, monkeypatch, capsys
):
    # auto_element_wise derives the forward formula from the backward one, so
    # the two agree (adjoint passes) while both are wrong for complex inputs.
    spec = HARNESS + entry(SIN, "self: grad * self.cos()", "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin")
    out, _ = capsys.readouterr()
    assert rc == 1
    assert set(failures(out)) == {
        (k, "complex128", c) for k in ("sin", "sin_") for c in ("slow", "fast")
    }


def test_verbose_prints_each_failure_in_full(tmp_path, monkeypatch, capsys):
    spec = HARNESS + entry(SIN, SIN_BW, "result: self_t * self_p.sin()")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin_", "-v")
    out, _ = capsys.readouterr()
    assert rc == 1
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
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "mul.Tensor")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    kernels = ("sin", "sin_", "mul.Tensor", "mul_.Tensor")
    assert set(found) == {(k, d, c) for k in kernels for d in DTYPES for c in CHECKS}
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


# ---------------------------------------------------------------- domains


def test_real_log_needs_its_sample_domain(tmp_path, monkeypatch, capsys):
    # Without `sample: self=positive`, real log of the negative draws is NaN: the
    # numerical derivative is NaN and gradcheck fails in float64. The adjoint check
    # compares the formulas only (finite 1/x) and passes; complex log is
    # holomorphic off the negative real axis, which random complex draws miss.
    spec = HARNESS + entry(LOG, LOG_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "log", "-v", "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    assert set(found) == {
        (k, "float64", c) for k in ("log", "log_") for c in ("slow", "fast")
    }
    assert "numerical:  nan" in out
    rows = table(tmp_path / "r.md")
    for row in rows.values():
        assert row["float64 adjoint"] == "pass"
        assert [row[f"complex128 {c}"] for c in CHECKS] == ["pass"] * 3


def test_ops_torch_refuses_in_complex_are_na(tmp_path, monkeypatch, capsys):
    spec = (
        HARNESS
        + entry(
            "maximum(Tensor self, Tensor other) -> Tensor",
            "self: unbroadcast(grad * winner_weight(self, other), self)",
            "other: unbroadcast(grad * winner_weight(other, self), other)",
            "result: self_t * winner_weight(self_p, other_p)"
            " + other_t * winner_weight(other_p, self_p)",
        )
        + entry(
            "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
            "sample:",
            "  - min=-0.5, max=0.5",
            "  - min=-0.5",
            "self: grad * clamp_mask(self, min, max)",
            "result: auto_element_wise",
        )
        # No differentiable input: nothing to check at all.
        + entry(
            "eq.Tensor(Tensor self, Tensor other) -> Tensor",
            "non_differentiable: [self, other]",
        )
    )
    rc = validate(tmp_path, monkeypatch, spec, "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert "7 kernels: 5 pass, 0 fail, 2 have no derivatives to check" in out
    rows = table(tmp_path / "r.md")
    assert list(rows) == [
        "alias",
        "clone",
        "maximum",
        "clamp",
        "clamp_",
        "eq.Tensor",
        "eq_.Tensor",
    ]
    for kernel in ("maximum", "clamp", "clamp_"):
        assert [rows[kernel][f"float64 {c}"] for c in CHECKS] == ["pass"] * 3
        assert [rows[kernel][f"complex128 {c}"] for c in CHECKS] == ["n/a"] * 3
    for kernel in ("eq.Tensor", "eq_.Tensor"):
        assert [rows[kernel][c] for c in COLUMNS] == ["n/a"] * 6
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="na"') == 3 * 3 + 2 * 6
    assert (
        'class="na" title="sample, 2-d: torch refuses: RuntimeError: maximum not '
        'implemented for complex tensors."' in html
    )
    assert (
        'class="na" title="sample 1, 2-d: torch refuses: NotImplementedError:' in html
    )
    assert 'title="sample, 2-d: no differentiable input or output"' in html


def test_unlisted_tensor_list_argument(tmp_path, monkeypatch, capsys):
    # A Tensor[] argument without a sample gets a list of two tensors.
    spec = HARNESS + entry(
        "cat(Tensor[] tensors, int dim=0) -> Tensor",
        "tensors: split_like(grad, tensors, dim)",
        "result: auto_linear",
    )
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "cat")
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "1 kernels: 1 pass, 0 fail" in out


# ---------------------------------------------------------------- the real spec


def test_real_spec_selection_passes(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    ops = [
        "exp",
        "mul.Tensor",
        "view",
        "max.dim",
        "cat",
        "add_.Tensor",
        "tanh_backward",
        "bernoulli",  # random: each evaluation is seeded alike
    ]
    report = tmp_path / "real"
    rc = main(["validate", "--no-progress", "--report", str(report), "--ops", *ops])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert "FAIL" not in out
    rows = table(report.with_suffix(".md"))
    assert set(ops) <= set(rows)
    assert "exp_" in rows  # derived in-place variants of a selected entry
    for kernel, row in rows.items():
        assert [row[f"float64 {c}"] for c in CHECKS] == ["pass"] * 3, kernel
    assert re.search(rf"{len(rows)} kernels: {len(rows)} pass, 0 fail", out)


def _real_entry(name: str) -> str:
    """The text of one entry of the real spec."""
    text = (REPO / "derivatives.yaml").read_text()
    start = text.index(f"- name: {name}(")
    end = text.find("\n- name: ", start + 1)
    return text[start:] if end < 0 else text[start : end + 1]


@pytest.mark.parametrize("statistics", [True, False])
def test_statistics_move_with_their_source(tmp_path, monkeypatch, capsys, statistics):
    # The rule of native_layer_norm_backward takes mean and rstd as the input's.
    # With samples that recompute them from the perturbed input it passes; with
    # fixed ones, finite differences see another function and it fails.
    real = _real_entry("native_layer_norm_backward")
    if not statistics:
        real = re.sub(
            r"mean_of\(input, dims=\[2\], keepdim=True\)", "any(2, 3, 1)", real
        )
        real = re.sub(r"rstd_of\(input, dims=\[2\][^)]*\)", "positive(2, 3, 1)", real)
    rc = validate(
        tmp_path, monkeypatch, HARNESS + real, "--ops", "native_layer_norm_backward"
    )
    out, _ = capsys.readouterr()
    if statistics:
        assert rc == 0, out
    else:
        assert rc == 1
        found = failures(out)
        assert ("native_layer_norm_backward", "float64", "slow") in found
        assert all(detail.startswith("sample 1") for _, detail in found.values())


# ---------------------------------------------------------------- the cwd guard


def test_guard_names_what_the_body_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FilesWritten) as caught, empty_cwd() as inside:
        assert Path.cwd() == inside and inside != tmp_path
        Path("leak.txt").write_text("x")
        Path("sub").mkdir()
        Path("sub/deep.bin").write_bytes(b"x")
    assert caught.value.names == ["leak.txt", "sub", str(Path("sub/deep.bin"))]
    assert "leak.txt" in str(caught.value) and "deep.bin" in str(caught.value)
    assert Path.cwd() == tmp_path
    assert not inside.exists()  # removed, whatever was in it
    assert list(tmp_path.iterdir()) == []


def test_guard_passes_when_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with empty_cwd() as inside:
        assert Path.cwd() == inside
        torch.rand(3).sin()
    assert Path.cwd() == tmp_path
    assert not inside.exists()


def test_guard_restores_the_cwd_on_exceptions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyError), empty_cwd():
        raise KeyError("boom")
    assert Path.cwd() == tmp_path
    # A body that moves elsewhere and raises: the old directory still comes back.
    with pytest.raises(ValueError), empty_cwd():
        os.chdir(REPO)
        raise ValueError
    assert Path.cwd() == tmp_path
    # Writing and raising: the write is reported, the exception chained.
    with pytest.raises(FilesWritten) as caught, empty_cwd():
        Path("partial").write_text("x")
        raise RuntimeError("and then it crashed")
    assert caught.value.names == ["partial"]
    assert isinstance(caught.value.__context__, RuntimeError)
    assert Path.cwd() == tmp_path


def test_validate_runs_kernels_in_an_empty_cwd_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    from dualgen.tools import validate as validate_module

    seen = []
    original = validate_module.validate_kernel

    def recording(*args):
        seen.append(Path.cwd())
        assert list(Path.cwd().iterdir()) == []
        return original(*args)

    monkeypatch.setattr(validate_module, "validate_kernel", recording)
    spec = HARNESS + entry(SIN, SIN_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "sin_")
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "FAIL" not in out
    assert len(seen) == 2 and len(set(seen)) == 2  # a fresh directory per kernel
    assert all(d != tmp_path and not d.exists() for d in seen)
    assert Path.cwd() == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == ["derivatives.yaml"]


def test_validate_fails_a_kernel_that_writes_into_its_cwd(
    tmp_path, monkeypatch, capsys
):
    from dualgen.tools import validate as validate_module

    original = validate_module.validate_kernel

    def writing(entry, op, info, samples):
        report = original(entry, op, info, samples)
        if info.name == "sin_":
            Path("stolen.txt").write_text("x")  # what a formula must never do
        return report

    monkeypatch.setattr(validate_module, "validate_kernel", writing)
    spec = HARNESS + entry(SIN, SIN_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "sin_")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    assert set(found) == {("sin_", d, c) for d in DTYPES for c in CHECKS}
    for spec_line, detail in found.values():
        assert spec_line == line_of(spec, SIN)
        assert detail == "wrote into its working directory: stolen.txt"
    assert "2 kernels: 1 pass, 1 fail" in out
    assert [p.name for p in tmp_path.iterdir()] == ["derivatives.yaml"]


# ---------------------------------------------------------------- tools/inputs.py


def sample(**values) -> Sample:
    return Sample(tuple(values.items()), None)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_free_shapes_give_2d_0d_and_empty_cases(dtype):
    cases = cases_for(aten.sin.default, (), dtype, 0)
    assert [c.label for c in cases] == ["sample, 2-d", "sample, 0-d", "sample, empty"]
    assert [tuple(c.values["self"].shape) for c in cases] == [(3, 4), (), (0, 4)]
    assert all(c.values["self"].dtype == dtype for c in cases)


def test_declared_shapes_give_one_case():
    cases = cases_for(
        aten.view.default,
        (sample(self=TensorSample("any", (3, 4)), size=(4, 3)),),
        torch.float64,
        0,
    )
    assert [c.label for c in cases] == ["sample"]
    assert cases[0].values["self"].shape == (3, 4)
    assert cases[0].values["size"] == [4, 3]


def test_undeclared_tensor_keeps_the_default_shapes():
    # `self` has a shape; `other`, not in the sample, is tried in each default one.
    cases = cases_for(
        aten.mul.Tensor, (sample(self=TensorSample("any", (2, 3))),), torch.float64, 0
    )
    assert [tuple(c.values["self"].shape) for c in cases] == [(2, 3)] * 3
    assert [tuple(c.values["other"].shape) for c in cases] == [(3, 4), (), (0, 4)]


def test_several_samples_and_defaults():
    samples = (sample(min=-0.5, max=0.5), sample(min=-0.5))
    cases = cases_for(aten.clamp.default, samples, torch.float64, 0)
    assert [c.label for c in cases] == [
        f"sample {n}, {v}" for n in (1, 2) for v in ("2-d", "0-d", "empty")
    ]
    assert [(c.values["min"], c.values["max"]) for c in cases] == [(-0.5, 0.5)] * 3 + [
        (-0.5, None)
    ] * 3
    # Schema defaults, then type defaults for required arguments.
    add, *_ = cases_for(aten.add.Tensor, (), torch.float64, 0)
    assert add.values["alpha"] == 1
    softmax, *_ = cases_for(aten.softmax.int, (), torch.float64, 0)
    assert softmax.values["dim"] == -1 and softmax.values["dtype"] is None
    full, *_ = cases_for(aten.full_like.default, (), torch.float64, 0)
    assert full.values["fill_value"] == 0.5


def test_tensor_list_sample():
    tensors = TensorListSample((TensorSample("any", (2, 3)), TensorSample("positive")))
    cases = cases_for(
        aten.cat.default, (sample(tensors=tensors, dim=1),), torch.float64, 0
    )
    assert len(cases) == 3  # the unshaped item takes the default shapes
    first = cases[0].values
    assert isinstance(first["tensors"], list) and first["dim"] == 1
    assert [tuple(t.shape) for t in first["tensors"]] == [(2, 3), (3, 4)]
    assert (first["tensors"][1] > 0).all()


def parsed(op, text: str):
    """A sample as the spec writes it, parsed against `op`'s arguments."""
    from dualgen.tools.errors import Location
    from dualgen.tools.schema import parse_schema

    schema = parse_schema(str(op._schema).removeprefix("aten::"))
    arguments = {a.name: a for a in schema.arguments}
    return parse_sample(text, arguments, Location("spec.yaml", 1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_tensor_literals(dtype):
    (case,) = cases_for(
        aten.index_put.default,
        (
            parsed(
                aten.index_put.default,
                "self=tensor([[nan, 1.5], [-inf, 2]]), "
                "indices=[None, tensor([1, 1])], values=any(2), accumulate=True",
            ),
        ),
        dtype,
        0,
    )
    values = case.values
    assert values["self"].dtype is dtype  # numbers take the case's dtype
    expected = torch.tensor([[float("nan"), 1.5], [-float("inf"), 2.0]], dtype=dtype)
    torch.testing.assert_close(values["self"], expected, equal_nan=True)
    none, index = values["indices"]
    assert none is None and index.dtype is torch.int64 and index.tolist() == [1, 1]
    (mask,) = cases_for(
        aten.masked_fill.Scalar,
        (parsed(aten.masked_fill.Scalar, "mask=tensor([[True], [False]]), value=2"),),
        dtype,
        0,
    )[:1]
    assert mask.values["mask"].dtype is torch.bool
    assert mask.values["mask"].tolist() == [[True], [False]]


def test_named_numbers_and_float_lists():
    (norm,) = cases_for(
        aten.linalg_vector_norm.default,
        (parsed(aten.linalg_vector_norm.default, "self=any(3), ord=-inf, dim=[0]"),),
        torch.float64,
        0,
    )
    assert norm.values["ord"] == -float("inf")
    op = aten.upsample_bilinear2d.vec
    (up,) = cases_for(
        op,
        (
            parsed(
                op,
                "input=any(1, 1, 2, 2), output_size=None, align_corners=False, "
                "scale_factors=[2.0, 1.5]",
            ),
        ),
        torch.float64,
        0,
    )
    assert up.values["scale_factors"] == [2.0, 1.5]


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_scalar_type_defaults_to_the_sample_dtype(dtype):
    case, *_ = cases_for(aten.to.dtype, (), dtype, 0)
    assert case.values["dtype"] is dtype
    (declared,) = cases_for(
        aten.to.dtype,
        (sample(self=TensorSample("any", (2,)), dtype=DtypeName("float32")),),
        dtype,
        0,
    )
    assert declared.values["dtype"] is torch.float32


def draw(domain: str, dtype: torch.dtype, shape=(40, 25)) -> torch.Tensor:
    (case,) = cases_for(
        aten.sin.default, (sample(self=TensorSample(domain, shape)),), dtype, 0
    )
    return case.values["self"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_domains(dtype):
    positive = draw("positive", dtype)
    assert positive.dtype == dtype and positive.shape == (40, 25)
    assert (positive.real >= 0.5).all() and (positive.real < 1.5).all()
    unit = draw("unit", dtype)
    assert (unit.real.abs() < 0.8).all()
    if dtype.is_complex:
        assert (unit.imag.abs() < 0.8).all() and (unit.imag != 0).any()
    else:
        assert (unit.abs() < 1).all()
    nonzero = draw("nonzero", dtype)
    assert (nonzero.real.abs() >= 0.5).all()
    assert (nonzero.real < 0).any() and (nonzero.real > 0).any()
    distinct = draw("distinct", dtype).real
    assert distinct.unique().numel() == distinct.numel()
    anything = draw("any", dtype)
    assert (anything.real < 0).any() and (anything.real > 0).any()


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_bool_domain(dtype):
    cases = cases_for(
        aten.where.self, (sample(condition=TensorSample("bool")),), dtype, 0
    )
    assert len(cases) == 3
    for case in cases:
        assert case.values["condition"].dtype == torch.bool
        assert case.values["self"].dtype == dtype
    mask = cases[0].values["condition"]
    assert mask.any() and not mask.all()


def test_cases_are_deterministic_for_a_seed():
    samples = (
        sample(self=TensorSample("any", (3, 4))),
        sample(self=TensorSample("distinct"), dim=0, keepdim=True),
    )

    def tensors(seed):
        cases = cases_for(aten.max.dim, samples, torch.complex128, seed)
        return [c.values["self"] for c in cases]

    first, again, other = tensors(7), tensors(7), tensors(8)
    assert len(first) == 4
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


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
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "clone")
    out, _ = capsys.readouterr()
    assert rc == 1
    assert ("clone", "float64", "slow") in failures(out)


def test_gauge_invariants_ignore_the_phase_of_each_vector():
    from dualgen.tools.validate import GAUGE_INVARIANTS

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
