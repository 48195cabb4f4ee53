"""Mistakes in the helpers' one source (helpers/*.yaml): each is one located line,
`helpers/<file>:LINE: error: ...`, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dualgen.tools.cli import main

TINY = Path(__file__).parent / "golden" / "spec.yaml"

GOOD = """\
- helper: doubled(Tensor t) -> Tensor
  doc: Twice `t`.
  body: |
    return t * 2
"""

CASES = [
    (
        "a_while_loop",
        "- helper: spin(Tensor t) -> Tensor\n  doc: d\n  body: |\n    x = t\n    while x.sum() > 0:\n        x = x - 1\n    return x\n",
        "helpers/extra.yaml:5: error: spin: 'While' statements are not allowed in a helper's body (assignments, calls, if, for and return are)",
    ),
    (
        "a_builtin",
        "- helper: count(Tensor t) -> Tensor\n  doc: d\n  body: |\n    return t * len(t)\n",
        "helpers/extra.yaml:4: error: count: calls to builtins are not allowed ('len')",
    ),
    (
        "an_unknown_key",
        "- helper: f(Tensor t) -> Tensor\n  doc: d\n  color: red\n  body: |\n    return t\n",
        "helpers/extra.yaml:3: error: unknown key 'color' (allowed: helper, overloads, internal, doc, body)",
    ),
    (
        "a_body_cpp_cannot_print",
        "- helper: first(Tensor t) -> Tensor\n  doc: d\n  body: |\n    return t[t > 0]\n",
        "helpers/extra.yaml:4: error: first: no C++ twin (first(Tensor t) -> Tensor): line 1: `t[t > 0]`: an index of ints only",
    ),
    (
        # dualgen.formulas' hand-written helpers import the generated ones: the
        # generated Python could not import this back (its C++ twin would hide it).
        "a_call_to_a_hand_written_helper",
        "- helper: q_tangent(Tensor a_t, Tensor t_t, Tensor a, Tensor t) -> Tensor\n  doc: d\n  body: |\n    q = a * 2\n    return householder_product_tangent(a_t, t_t, q, t)\n",
        "helpers/extra.yaml:5: error: q_tangent: 'householder_product_tangent' is a hand-written helper (dualgen.formulas): a helper in helpers/ calls torch, other helpers of helpers/ and dualgen.helper_basics only; write it here, or call it from the spec's formula",
    ),
    (
        "a_helper_defined_twice",
        GOOD + GOOD,
        "helpers/extra.yaml:5: error: helper doubled is defined twice (first at line 1)",
    ),
]


@pytest.mark.parametrize(
    "text, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_helper_error_is_one_located_line(
    tmp_path, monkeypatch, capsys, text, expected
):
    shutil.copy(TINY, tmp_path / "spec.yaml")
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "extra.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--spec", "spec.yaml", "--out", "out"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == expected
    assert not (tmp_path / "out").exists()


def test_a_good_helper_is_written_in_both_languages(tmp_path, monkeypatch):
    shutil.copy(TINY, tmp_path / "spec.yaml")
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "extra.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--spec", "spec.yaml", "--out", "out"]) == 0
    assert "def doubled(t):" in (tmp_path / "out" / "helpers.py").read_text()
    cpp = (tmp_path / "out" / "cpp" / "helpers_extra.cpp").read_text()
    assert "at::Tensor doubled(const at::Tensor& t) {\n  return t * 2;\n}" in cpp
    assert (
        "at::Tensor doubled(const at::Tensor& t);"
        in (tmp_path / "out" / "cpp" / "formulas.h").read_text()
    )
