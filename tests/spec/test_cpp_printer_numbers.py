"""The C++ printer writes a number minus or over a tensor as Python computes it:
`1 - x` is `torch.rsub(x, 1)` and `2 / x` is `x.reciprocal() * 2` in Python,
where ATen's C++ operators would first fill a tensor of `x`'s dtype with the
number (an integer `x` then gives an integer result)."""

import ast

import pytest

from tools.check.twins import load_twins, manifest_path
from tools.emit_cpp.printer import CppPrinter
from tools.emit_cpp.type_table import Type

_TYPES = {"self_p": Type("Tensor"), "weight": Type("Scalar"), "n": Type("int")}


@pytest.mark.parametrize(
    "formula, printed",
    [
        ("1 - self_p", "dualgen::rsub(self_p, 1)"),
        ("0.5 - self_p * self_p", "dualgen::rsub(self_p * self_p, 0.5)"),
        ("weight - self_p", "dualgen::rsub(self_p, weight)"),
        ("2 / self_p", "self_p.reciprocal() * 2"),
        ("2 / (self_p + 1)", "(self_p + 1).reciprocal() * 2"),
        ("self_p * (2 / self_p)", "self_p * (self_p.reciprocal() * 2)"),
        ("self_p - 1", "self_p - 1"),
        ("1 + self_p", "1 + self_p"),
        ("1 - n", "1 - n"),  # numbers stay C++ numbers
    ],
)
def test_number_on_the_left(formula, printed):
    assert (
        CppPrinter(_TYPES, load_twins(manifest_path())).expr(
            ast.parse(formula, mode="eval").body
        )
        == printed
    )
