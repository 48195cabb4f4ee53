"""Formula rewriting: zero-tangent specialisation, conjugation, auto_linear."""

from __future__ import annotations

import ast

import pytest

from dualgen.tools.analyse.derive import conj, element_wise_jvp, op_call
from dualgen.tools.analyse.zeros import specialise
from dualgen.tools.spec.schema import parse_schema


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


def test_zero_of_a_tensor_list_is_a_zero_per_tensor():
    """An absent list of tangents meeting a present tangent in one call: a zero per
    tensor of the list (fill_absent reads the absent list as None in Python, empty
    in C++), never zeros_like of the list itself."""
    result = specialise(
        ast.parse("f(a_t, ws_t, ws_p)", mode="eval").body,
        frozenset({"a_t"}),
        frozenset({"ws_t"}),
        lists={"ws_t": "ws_p"},
    )
    assert ast.unparse(result.expr) == "f(a_t, fill_absent(ws_t, ws_p), ws_p)"


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
    from dualgen.tools.spec.schema import TorchOperators

    found = _inplace_counterpart(parse_schema(functional), TorchOperators())
    assert (found.full_name if found else None) == inplace


# A formula with more tangents than MAX_SPECIALISED_TANGENTS gets one branch, taken
# when any tangent is present, with zeros for the absent ones: the same tangents as
# the enumerated branches.
DENSE_SPEC = """\
- name: addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor
  self: grad
  tensor1: grad * tensor2 * value
  tensor2: grad * tensor1 * value
  result: self_t + value * (tensor1_t * tensor2_p + tensor1_p * tensor2_t)
- name: cat(Tensor[] tensors, int dim=0) -> Tensor
  tensors: cat_grads(grad, tensors, dim)
  result: auto_linear
- name: native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)
  sample: normalized_shape=[3]
  output_differentiability: [true, false, false]
  input, weight, bias: torch.ops.aten.native_layer_norm_backward(grad, input, normalized_shape, result1, result2, weight, bias, [True, weight is not None, bias is not None])
  result0: norm_affine_tangent(layer_norm_tangent(input_t, input_p, normalized_shape, eps), layer_norm_xhat(input_p, normalized_shape, eps), weight_p, weight_t, bias_t)
"""


def _kernels(tmp_path, monkeypatch, limit: int, tag: str):
    from dualgen.tools import analyse as analyse_module
    from dualgen.tools.cli import generate_files
    from dualgen.tools.validate import load_kernels

    monkeypatch.setattr(analyse_module, "MAX_SPECIALISED_TANGENTS", limit)
    spec = tmp_path / f"{tag}.yaml"
    spec.write_text(DENSE_SPEC)
    outcome = generate_files(spec)
    return outcome.files["jvp.py"], load_kernels(outcome.files)


def test_too_many_tangents_give_one_dense_branch(tmp_path, monkeypatch):
    import itertools

    import torch

    from dualgen.dispatch.inplace import call_with

    enumerated_text, enumerated = _kernels(tmp_path, monkeypatch, 4, "enumerated")
    dense_text, dense = _kernels(tmp_path, monkeypatch, 0, "dense")
    assert "zeros_like(tensor1_p) if" not in enumerated_text
    # Filled with zeros; a primal torch passes undefined (a backward op's
    # attn_bias) keeps None.
    flat = " ".join(dense_text.replace("(", " ").replace(")", " ").split())
    assert (
        "tensor1_t = torch.zeros_like tensor1_p "
        "if tensor1_t is None and tensor1_p is not None else tensor1_t" in flat
    )
    # Optional tensors' tangents are still branched on: their primal may be None.
    assert "elif weight_t is None and bias_t is None and input_t is not None:" in (
        dense_text
    )
    aten = torch.ops.aten
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    cases = {
        aten.addcmul.default: ([r(3, 4), r(3, 4), r(4), 0.5], [r(3, 4), r(3, 4), r(4)]),
        aten.cat.default: ([[r(2, 3), r(1, 3)], 0], [[r(2, 3), r(1, 3)]]),
        aten.native_layer_norm.default: (
            [r(2, 3), [3], r(3), None, 1e-5],
            [r(2, 3), r(3), None],
        ),
    }
    for op, (primals, tangents) in cases.items():
        out = call_with(op, primals)
        outputs = tuple(out) if isinstance(out, tuple) else (out,)
        for mask in itertools.product([False, True], repeat=len(tangents)):
            given = [t if keep else None for t, keep in zip(tangents, mask)]
            if op is aten.cat.default and mask[0]:
                given = [[tangents[0][0], None]]  # a list with one tangent absent
            want = enumerated[op].jvp(*primals, *given, *outputs)
            got = dense[op].jvp(*primals, *given, *outputs)
            want = want[0] if isinstance(want, tuple) else want
            got = got[0] if isinstance(got, tuple) else got
            if not any(t is not None for t in given):
                assert got is None and want is None
                continue
            torch.testing.assert_close(got, want)


# An argument named `grad` keeps its name; the one output's gradient, written
# grads[0] or grad_<output>, is the VJP kernel's parameter grad_result.
GRAD_ARGUMENT_SPEC = """\
- name: trace_backward(Tensor grad, SymInt[] sizes) -> Tensor
  sample: grad=any(), sizes=[3, 4]
  grad: grads[0].diagonal().sum()
  result: torch.ops.aten.trace_backward(grad_t, sizes)
- name: masked_select_backward(Tensor grad, Tensor input, Tensor mask) -> Tensor
  sample: grad=any(2), input=any(2, 2), mask=tensor([[True, False], [False, True]])
  non_differentiable: [mask]
  grad: grad_result.masked_select(mask)
  input: torch.zeros_like(grad_result)
  result: torch.ops.aten.masked_select_backward(grad_t, input_p, mask_p)
"""


def test_an_argument_named_grad_keeps_its_name(tmp_path):
    import torch

    from dualgen.tools.cli import generate_files
    from dualgen.tools.validate import load_kernels

    spec = tmp_path / "grad_argument.yaml"
    spec.write_text(GRAD_ARGUMENT_SPEC)
    outcome = generate_files(spec)
    vjp = outcome.files["vjp.py"]
    assert "def trace_backward_default(grad_result, grad, sizes, result):" in vjp
    assert "grad_grad = grad_result.diagonal().sum()" in vjp
    assert (
        "def masked_select_backward_default(grad_result, grad, input, mask, result):"
        in vjp
    )
    assert "def trace_backward_default(grad_p, sizes, grad_t, result):" in (
        outcome.files["jvp.py"]
    )
    kernels = load_kernels(outcome.files)
    aten = torch.ops.aten
    g = torch.tensor(1.5, dtype=torch.float64)
    cotangent = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    result = aten.trace_backward(g, [3, 4])
    info = kernels[aten.trace_backward.default]
    (got,) = info.vjp(cotangent, g, [3, 4], result)
    torch.testing.assert_close(got, cotangent.diagonal().sum())
    g_t = torch.tensor(2.0, dtype=torch.float64)
    tangent = info.jvp(g, [3, 4], g_t, result)
    tangent = tangent[0] if isinstance(tangent, tuple) else tangent
    torch.testing.assert_close(tangent, aten.trace_backward(g_t, [3, 4]))
    mask = torch.tensor([[True, False], [False, True]])
    x, g2 = torch.randn(2, 2, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    out = aten.masked_select_backward(g2, x, mask)
    got = kernels[aten.masked_select_backward.default].vjp(
        cotangent[:2, :2], g2, x, mask, out
    )
    torch.testing.assert_close(got[0], cotangent[:2, :2].masked_select(mask))
