"""Spec mistakes and the exact errors `dualgen generate` reports for them: the
helpers and the runner shared by tests/spec/test_errors_*.py.

Each case is an id, an inline spec, and the errors expected on stderr, one string
per error, in order (the final `N error(s); out left unchanged` line is checked
too).
Every failed run must exit 1, print no traceback, write nothing on stdout, and
leave an existing output directory byte-for-byte as it was.

A test module defines its CASES and takes the runner from here:
`test_spec_error_is_reported_exactly = make_error_test(CASES)`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from dualgen.tools.cli import main

SIN = "sin(Tensor self) -> Tensor"
NEG = "neg(Tensor self) -> Tensor"
MUL = "mul.Tensor(Tensor self, Tensor other) -> Tensor"
MAX = "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
VIEW = "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
ADD = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
ADD_ = "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"


NOT_KNOWN = (
    "is no aten operator and not on the allowlist of pure Python functions "
    "(tools/check/admissible.py), so it is not known to be pure tensor math"
)
NOT_KNOWN_METHOD = NOT_KNOWN.replace("Python functions", "Tensor methods")


def entry(name: str, *lines: str) -> str:
    """One spec entry: `- name: <name>` then its other keys, one per line."""
    return f"- name: {name}\n" + "".join(f"  {line}\n" for line in lines)


SIN_OK = entry(SIN, "self: grad * self.cos().conj()", "result: auto_element_wise")
MUL_BW = ("self: grad * other.conj()", "other: grad * self.conj()")
MAX_BW = ("self: grad_values", "output_differentiability: [true, false]")


def neg_bw(formula: str) -> str:
    """A backward formula on line 2 (auto_linear adds no follow-on error)."""
    return entry(NEG, f"self: {formula}", "result: auto_linear")


def mul_fw(formula: str) -> str:
    """A forward formula on line 4."""
    return entry(MUL, *MUL_BW, f"result: {formula}")


def bw(message: str) -> str:
    return f"spec.yaml:2: error: neg: self: {message}"


def fw(message: str) -> str:
    return f"spec.yaml:4: error: mul.Tensor: result: {message}"


def not_linear(why: str) -> str:
    return fw(f"forward formula is not linear in the tangents: {why}")


UNKNOWN_KEY = "not an argument, an output or one of name, non_differentiable, output_differentiability, sample, convention, renamed_in_torch, torch_releases"
ALLOWED_NAMESPACES = (
    "torch, torch.linalg, torch.special, torch.fft, torch.nn.functional, torch.ops.aten"
)


SENTINEL = b"sentinel \x00\xff bytes\n"


def _generate(tmp_path: Path, monkeypatch, spec_text: str | bytes) -> int:
    monkeypatch.chdir(tmp_path)
    data = spec_text if isinstance(spec_text, bytes) else spec_text.encode("utf-8")
    Path("spec.yaml").write_bytes(data)
    return main(["generate", "--spec", "spec.yaml", "--out", "out"])


def make_error_test(cases):
    """The test that runs each of `cases` and checks its errors, exactly."""

    @pytest.mark.parametrize(
        "spec_text, expected",
        [case[1:] for case in cases],
        ids=[case[0] for case in cases],
    )
    def test_spec_error_is_reported_exactly(
        tmp_path, monkeypatch, capsys, spec_text, expected
    ):
        out = tmp_path / "out"
        out.mkdir()
        (out / "sentinel.py").write_bytes(SENTINEL)

        assert _generate(tmp_path, monkeypatch, spec_text) == 1

        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        assert captured.out == ""
        summary = f"{len(expected)} error(s); out left unchanged"
        assert captured.err == "".join(f"{line}\n" for line in [*expected, summary])
        # The output is untouched, and nothing else appeared (no tag was executed).
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "spec.yaml"]
        assert [p.name for p in out.iterdir()] == ["sentinel.py"]
        assert (out / "sentinel.py").read_bytes() == SENTINEL

    return test_spec_error_is_reported_exactly


def all_case_ids() -> list[str]:
    """The ids of the CASES of every tests/spec/test_errors_*.py module."""
    modules = sorted(Path(__file__).parent.glob("test_errors_*.py"))
    return [
        case[0] for path in modules for case in importlib.import_module(path.stem).CASES
    ]
