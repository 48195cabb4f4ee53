"""Formula rewriting: zero-tangent specialisation, conjugation, auto_linear."""

from __future__ import annotations

import ast

import pytest

from dualgen.tools.derive import conj, element_wise_jvp, op_call
from dualgen.tools.schema import parse_schema
from dualgen.tools.zeros import specialise


def _spec(src: str, present: set[str], absent: set[str]):
    result = specialise(
        ast.parse(src, mode="eval").body, frozenset(present), frozenset(absent)
    )
    return (None if result.expr is None else ast.unparse(result.expr)), result.dropped


@pytest.mark.parametrize(
    "src, present, absent, expected, dropped",
    [
        ("a_t * x + b_t * y", {"a_t"}, {"b_t"}, "a_t * x", True),
        ("a_t * x + b_t * y", {"b_t"}, {"a_t"}, "b_t * y", True),
        ("a_t - b_t * y", {"b_t"}, {"a_t"}, "-(b_t * y)", True),
        ("a_t - b_t * y", {"a_t"}, {"b_t"}, "a_t", True),
        ("a_t * x + b_t * y", set(), {"a_t", "b_t"}, None, False),
        ("scale(b_t, alpha)", set(), {"b_t"}, None, False),
        ("b_t.sum(dim, keepdim=True) * r", set(), {"b_t"}, None, False),
        ("(a_t - b_t * r) / x", {"a_t"}, {"b_t"}, "a_t / x", True),
        (
            "torch.where(c, a_t, b_t)",
            {"a_t"},
            {"b_t"},
            "torch.where(c, a_t, torch.zeros_like(b_p))",
            False,
        ),
        ("torch.where(c, a_t, b_t)", set(), {"a_t", "b_t"}, None, False),
        (
            "a_t.mm(y) + x.mm(b_t)",
            {"a_t", "b_t"},
            set(),
            "a_t.mm(y) + x.mm(b_t)",
            False,
        ),
        ("r * (a_t - (r * a_t).sum(d))", set(), {"a_t"}, None, False),
    ],
)
def test_specialise_drops_terms_of_absent_tangents(
    src, present, absent, expected, dropped
):
    assert _spec(src, present, absent) == (expected, dropped)


def test_zero_of_an_optional_tensor_is_none_where_it_is():
    result = specialise(
        ast.parse("f(a_t, w_t)", mode="eval").body,
        frozenset({"a_t"}),
        frozenset({"w_t"}),
        frozenset({"w_t"}),
    )
    assert ast.unparse(result.expr) == (
        "f(a_t, None if w_p is None else torch.zeros_like(w_p))"
    )


@pytest.mark.parametrize(
    "src, expected",
    [
        ("x_t.conj() * f.conj()", "x_t * f"),
        ("-x_t.conj() * f.conj()", "-x_t * f"),
        ("x_t.conj() / (2 * r.conj())", "x_t / (2 * r)"),
        ("x_t.conj() * (r > 0)", "x_t * (r > 0)"),
        ("x_t.conj() * g(r)", "x_t * g(r).conj()"),
    ],
)
def test_conj_is_pushed_through_products(src, expected):
    assert ast.unparse(conj(ast.parse(src, mode="eval").body)) == expected


def test_element_wise_jvp_from_backward_formula():
    schema = parse_schema("sin(Tensor self) -> Tensor")
    backward = ast.parse("grad * self.cos().conj()", mode="eval").body
    assert (
        ast.unparse(element_wise_jvp(backward, schema, "self"))
        == "self_t * self_p.cos()"
    )


def test_auto_linear_calls_the_op_on_tangents_with_keywords():
    schema = parse_schema(
        "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"
    )
    assert (
        ast.unparse(op_call(schema, {"self"}))
        == "torch.ops.aten.sum.dim_IntList(self_t, dim, keepdim, dtype=dtype)"
    )
    where = parse_schema(
        "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"
    )
    assert (
        ast.unparse(op_call(where, {"self", "other"}))
        == "torch.ops.aten.where.self(condition_p, self_t, other_t)"
    )


@pytest.mark.parametrize(
    "functional, inplace",
    [
        ("sin(Tensor self) -> Tensor", "sin_"),
        (
            "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
            "add_.Tensor",
        ),
        # torch names these in-place overloads differently from the functional ones
        ("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", "pow_.Scalar"),
        ("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", "pow_.Tensor"),
        ("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", None),
        ("abs(Tensor self) -> Tensor", "abs_"),
        ("angle(Tensor self) -> Tensor", None),
    ],
)
def test_inplace_counterpart_matches_by_arguments(functional, inplace):
    from dualgen.tools.analyse import _inplace_counterpart
    from dualgen.tools.schema import TorchOperators

    found = _inplace_counterpart(parse_schema(functional), TorchOperators())
    assert (found.full_name if found else None) == inplace
