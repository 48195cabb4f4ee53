"""`did you mean ...?`: the suggestion is the name most likely meant."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dualgen.tools.check.suggest import closest, closest_op_name
from dualgen.tools.cli import main

TORCH_NAMES = [n for n in dir(torch) if not n.startswith("_")]


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("coss", "cos"),  # difflib's ratio alone picks `cross`
        ("sinn", "sin"),  # not `sinh` or `sinc`, as close by edits
        ("lgmama", "lgamma"),  # neighbours swapped
        ("sigmod", "sigmoid"),
        ("matmull", "matmul"),
    ],
)
def test_closest_torch_function(typed, meant):
    assert closest(typed, TORCH_NAMES) == meant


def test_no_suggestion_when_nothing_is_close():
    assert closest("frobnicate", TORCH_NAMES) is None
    # difflib's ratio is 0.6, but three edits are no typo of a six-letter name.
    assert closest("nosuch", ["cosh"], cutoff=0.6) is None


def test_without_an_overload_the_first_of_the_base_is_suggested():
    # By edits alone `mul.Scalar` (sharing the `l`) would win.
    assert closest_op_name("mull", ["mul.Tensor", "mul.Scalar"]) == "mul.Tensor"
    assert closest_op_name("mull", ["mul.Scalar", "mul.Tensor"]) == "mul.Scalar"


def test_op_names_prefer_the_same_base():
    known = ["mul.Tensor", "mul_.Tensor", "mm", "exp", "exp_"]
    assert closest_op_name("mull", known) == "mul.Tensor"
    assert closest_op_name("mul_.Tesnor", known) == "mul_.Tensor"
    assert closest_op_name("exp.default", known) == "exp"
    assert closest_op_name("nosuch", known) is None


def test_formula_error_suggests_the_closest_torch_function(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(
        "- name: sin(Tensor self) -> Tensor\n"
        "  self: grad * torch.coss(self).conj()\n"
        "  result: auto_element_wise\n"
    )
    assert main(["generate", "--spec", "spec.yaml", "--out", "out"]) == 1
    assert "'torch' has no 'coss'; did you mean 'cos'?" in capsys.readouterr().err
    assert not Path("out").exists()
