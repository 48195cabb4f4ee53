"""Specs for custom ops (torch.library.custom_op), docs/custom_ops.md: entries named
`ns::op(...)` are checked against the schema torch registers once `--import`
has imported the module defining them; the package written has Python kernels
only; `dualgen validate --import` checks them; the missing-rule stub of a custom
op is an entry that generates once its formulas are filled in.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from dualgen.missing import spec_stub
from dualgen.tools.cli import main

MODULE = "dualgen_cop_ops"
LIBRARY = """
import torch


@torch.library.custom_op("dualgen_cop::scale", mutates_args=())
def scale(x: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    return x * alpha


@torch.library.custom_op("dualgen_cop::mulexp", mutates_args=())
def mulexp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * torch.exp(y)


@torch.library.custom_op("dualgen_cop::bump_", mutates_args=("x",))
def bump_(x: torch.Tensor) -> None:
    x.mul_(2)


@torch.library.custom_op("dualgen_cop::norule", mutates_args=())
def norule(x: torch.Tensor, dims: list[int], w: float = 0.5) -> torch.Tensor:
    return (x.sin() * w).sum(dims)
"""

SCALE = """\
- name: dualgen_cop::scale(Tensor x, float alpha=2.) -> Tensor
  x: grad * alpha
  result: auto_linear
"""
MULEXP = """\
- name: dualgen_cop::mulexp(Tensor x, Tensor y) -> Tensor
  sample: x=any(3, 4), y=any(3, 4)
  x: grad * y.exp().conj()
  y: grad * result.conj()
  result: x_t * y_p.exp() + y_t * result
"""
SIN = """\
- name: sin(Tensor self) -> Tensor
  self: grad * self.cos().conj()
  result: auto_element_wise
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A directory holding the library module, as the working directory (the
    CLI's --import finds modules there); sys.path restored afterwards."""
    (tmp_path / f"{MODULE}.py").write_text(LIBRARY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, re.sub(r"in \d+\.\d+s", "in Ns", err)


def _generate(capsys, spec: str, *extra: str) -> tuple[int, str, str]:
    Path("spec.yaml").write_text(spec)
    return _run(capsys, "generate", "--spec", "spec.yaml", "--out", "out", *extra)


def test_a_custom_op_spec_writes_a_python_package(project, capsys):
    status, out, err = _generate(capsys, MULEXP + SCALE, "--import", MODULE)
    assert (status, out, err) == (0, "out: written (2 entries, 2 kernels)\n", "")
    files = sorted(p.relative_to("out").as_posix() for p in Path("out").rglob("*.py"))
    assert files == ["__init__.py", "jvp.py", "registry.py", "taylor.py", "vjp.py"]
    assert not Path("out/cpp").exists()
    registry = Path("out/registry.py").read_text()
    assert f"\nimport {MODULE}\n" in registry
    assert "KERNELS[torch.ops.dualgen_cop.mulexp.default] = KernelInfo(" in registry
    assert 'name="dualgen_cop::mulexp",' in registry
    assert registry.count("cpp_kernel=None,") == 2
    jvp = Path("out/jvp.py").read_text()
    assert "def dualgen_cop_mulexp_default(x_p, y_p, x_t, y_t, result):" in jvp
    assert '"""dualgen_cop::mulexp(Tensor x, Tensor y) -> Tensor"""' in jvp
    # auto_linear applies the custom op itself to the tangent.
    assert "return torch.ops.dualgen_cop.scale.default(x_t, alpha)" in jvp
    status, out, _ = _run(
        capsys, "generate", "--spec", "spec.yaml", "--out", "out", "--check",
        "--import", MODULE,
    )  # fmt: skip
    assert (status, out) == (0, "out is up to date (2 entries, 2 kernels)\n")


def test_a_spec_mixing_aten_and_custom_ops_has_no_cpp(project, capsys):
    status, _, err = _generate(capsys, SIN + SCALE, "--import", MODULE)
    assert (status, err) == (0, "")
    assert not Path("out/cpp").exists()
    registry = Path("out/registry.py").read_text()
    assert "KERNELS[aten.sin.default] = KernelInfo(" in registry
    assert 'cpp_kernel="' not in registry


def test_an_aten_spec_keeps_its_cpp(project, capsys):
    status, _, _ = _generate(capsys, SIN)
    assert status == 0
    assert Path("out/cpp/registry.cpp").is_file()
    assert 'cpp_kernel="aten::sin.default"' in Path("out/registry.py").read_text()


def test_a_namespace_nothing_registers_says_to_import_it(project, capsys):
    spec = "- name: nolib::op(Tensor x) -> Tensor\n  x: grad\n"
    status, out, err = _generate(capsys, spec)
    assert (status, out) == (1, "")
    assert err == (
        "spec.yaml:1: error: nolib::op: torch has no operator overload nolib::op; "
        "nothing registers operators in 'nolib': pass --import with the module "
        "that defines them\n1 error(s); out left unchanged\n"
    )


def _first_error(capsys, spec: str) -> str:
    """The first error line of generating `spec` (MODULE imported), which fails."""
    status, _, err = _generate(capsys, spec, "--import", MODULE)
    assert status == 1
    return err.splitlines()[0]


def test_a_misspelled_custom_op_gets_a_suggestion(project, capsys):
    spec = SCALE.replace("::scale(", "::scal(")
    assert _first_error(capsys, spec) == (
        "spec.yaml:1: error: dualgen_cop::scal: torch has no operator overload "
        "dualgen_cop::scal; did you mean 'dualgen_cop::scale'?"
    )


def test_a_schema_that_differs_is_refused_with_torchs(project, capsys):
    spec = SCALE.replace("alpha=2.)", "alpha=2.0)")
    assert _first_error(capsys, spec) == (
        "spec.yaml:1: error: dualgen_cop::scale: schema does not match torch: "
        "argument 2 is 'float alpha=2.0', torch has 'float alpha=2.' (torch: "
        "dualgen_cop::scale(Tensor x, float alpha=2.) -> Tensor)"
    )


def test_a_custom_op_that_writes_into_an_argument_is_refused(project, capsys):
    spec = "- name: dualgen_cop::bump_(Tensor(a0!) x) -> ()\n  x: grad * 2\n"
    assert _first_error(capsys, spec) == (
        "spec.yaml:1: error: dualgen_cop::bump_: custom op writes into 'x': a spec "
        "describes functional custom ops only (mutates_args=())"
    )


def test_a_module_that_does_not_import_is_one_error_line(project, capsys):
    Path("spec.yaml").write_text(SCALE)
    status, out, err = _run(
        capsys, "generate", "--spec", "spec.yaml", "--out", "out", "--import", "nope"
    )
    assert (status, out) == (1, "")
    assert err == (
        "dualgen: error: --import nope: ModuleNotFoundError: No module named 'nope'\n"
    )
    assert not Path("out").exists()


def test_validate_checks_the_custom_op_kernels(project, capsys):
    Path("spec.yaml").write_text(MULEXP + SCALE)
    argv = ["validate", "--spec", "spec.yaml", "--import", MODULE, "--no-progress"]
    status, out, err = _run(capsys, *argv)
    assert (status, err) == (0, "")
    assert out.startswith("2 kernels: 2 pass, 0 fail,")


def test_validate_fails_a_wrong_custom_op_formula(project, capsys):
    Path("spec.yaml").write_text(MULEXP.replace("+ y_t * result", "- y_t * result"))
    argv = ["validate", "--spec", "spec.yaml", "--import", MODULE, "--no-progress"]
    status, out, _ = _run(capsys, *argv)
    assert status == 1
    assert "FAIL dualgen_cop::mulexp [float64 slow] (spec line 1): " in out
    assert "Jacobian computed with forward mode mismatch" in out


def test_the_missing_rule_stub_of_a_custom_op_is_an_entry_to_fill_in(project, capsys):
    __import__(MODULE)
    stub = spec_stub(torch.ops.dualgen_cop.norule.default)
    assert stub == (
        "- name: dualgen_cop::norule(Tensor x, SymInt[] dims, float w=0.5) -> Tensor\n"
        "  sample: x=any(3, 4), dims=<SymInt[]>\n"
        "  x: <gradient of x, from grad>\n"
        "  result: <tangent, from x_t>"
    )
    # Filled in, it generates and validates.
    entry = (
        stub.replace("<SymInt[]>", "[1]")
        .replace(
            "<gradient of x, from grad>",
            "grad.unsqueeze(1).expand_as(x) * (x.cos() * w).conj()",
        )
        .replace("<tangent, from x_t>", "(x_t * x_p.cos() * w).sum(dims)")
    )
    status, _, err = _generate(capsys, entry + "\n", "--import", MODULE)
    assert (status, err) == (0, "")
    argv = ["validate", "--spec", "spec.yaml", "--import", MODULE, "--no-progress"]
    status, out, _ = _run(capsys, *argv)
    assert status == 0, out
