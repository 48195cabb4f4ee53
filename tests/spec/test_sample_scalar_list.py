"""`Scalar[]` arguments (`_foreach_pow.ScalarList`): their `sample:` value (a list of
numbers), what `dualgen validate` hands the op, their C++ type, the kernels
generated for them, and the mistakes a sample can make.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from spec_error_cases import _generate, entry, make_error_test

from dualgen.tools.emit_cpp.type_table import declaration, of_schema
from dualgen.tools.spec.errors import Location
from dualgen.tools.spec.sample import parse_sample
from dualgen.tools.spec.schema import parse_schema
from dualgen.tools.validate.inputs import cases_for

aten = torch.ops.aten

MINIMUM = "_foreach_minimum.ScalarList(Tensor[] self, Scalar[] scalars) -> Tensor[]"
MINIMUM_LINES = (
    "self: fill_absent(grad, result)",
    "result: self_t",
)


def parsed(op, text: str):
    """A sample as the spec writes it, parsed against `op`'s arguments."""
    schema = parse_schema(str(op._schema).removeprefix("aten::"))
    arguments = {a.name: a for a in schema.arguments}
    return parse_sample(text, arguments, Location("spec.yaml", 1))


def test_a_scalar_list_takes_a_list_of_numbers():
    sample = parsed(
        aten._foreach_pow.ScalarList,
        "self=[any(2), any(3), any(), any()], exponent=[2, -1.5, inf, 0]",
    )
    assert sample.get("exponent") == (2, -1.5, float("inf"), 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_validate_hands_the_op_a_list(dtype):
    op = aten._foreach_pow.ScalarList
    (case,) = cases_for(
        op,
        (parsed(op, "self=[positive(2), positive(3)], exponent=[2, 0.5]"),),
        dtype,
        0,
    )
    exponent = case.values["exponent"]
    assert exponent == [2, 0.5] and isinstance(exponent, list)
    first, second = op(**case.values)  # torch takes it as it is
    torch.testing.assert_close(first, case.values["self"][0] ** 2)
    torch.testing.assert_close(second, case.values["self"][1] ** 0.5)


def test_the_cpp_type_of_a_scalar_list():
    (argument,) = [a for a in parse_schema(MINIMUM).arguments if a.name == "scalars"]
    assert declaration(argument.type) == "std::vector<c10::Scalar>"
    assert of_schema(argument.type).name == "ScalarList"


def test_a_scalar_list_entry_generates(tmp_path, monkeypatch, capsys):
    spec = entry(
        MINIMUM,
        "sample: self=[any(2), any(3)], scalars=[0.5, -1]",
        "self: torch.ops.aten._foreach_mul.List(fill_absent(grad, result), "
        "torch.ops.aten._foreach_sign(torch.ops.aten._foreach_sub.ScalarList(self, scalars)))",
        "result: torch.ops.aten._foreach_mul.List(self_t, "
        "torch.ops.aten._foreach_sign(torch.ops.aten._foreach_sub.ScalarList(self_p, scalars)))",
    )
    assert _generate(tmp_path, monkeypatch, spec) == 0
    capsys.readouterr()
    cpp = "".join(p.read_text() for p in sorted(Path("out/cpp").glob("jvp_*.cpp")))
    assert (
        "const std::vector<c10::Scalar> scalars = "
        "unpack<std::vector<c10::Scalar>>(args[1]);" in cpp
    )
    assert "at::_ops::_foreach_sub_ScalarList::call(self_p, scalars)" in cpp


def _minimum(sample: str) -> str:
    return entry(MINIMUM, *MINIMUM_LINES, sample)


CASES = [
    (
        "sample_scalar_list_not_a_list",
        _minimum("sample: self=[any(2), any(3)], scalars=0.5"),
        [
            "spec.yaml:4: error: _foreach_minimum.ScalarList: sample: sample value for 'scalars' (Scalar[]) must be a list of numbers"
        ],
    ),
    (
        "sample_scalar_list_holds_a_bool",
        _minimum("sample: self=[any(2), any(3)], scalars=[0.5, True]"),
        [
            "spec.yaml:4: error: _foreach_minimum.ScalarList: sample: sample value for 'scalars' (Scalar[]) must be a number"
        ],
    ),
    (
        "sample_scalar_list_missing",
        entry(MINIMUM, *MINIMUM_LINES),
        [
            "spec.yaml:1: error: _foreach_minimum.ScalarList: sample: 'scalars' (Scalar[]) has no default; give it in every sample, e.g. `sample: scalars=...`"
        ],
    ),
]

test_spec_error_is_reported_exactly = make_error_test(CASES)
