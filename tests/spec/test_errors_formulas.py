"""Errors in a formula itself: syntax, size and depth, the names in scope (grad,
grads, tangents, primals), and the sandbox: builtins, dunders, private names,
torch functions and Tensor methods that are unknown, mutate or escape.

Forward formulas' linearity is in test_errors_forward.py.
"""

from __future__ import annotations

import sys

import pytest
from spec_error_cases import (
    ALLOWED_NAMESPACES,
    MAX,
    MAX_BW,
    MUL,
    MUL_BW,
    NEG,
    NOT_KNOWN,
    NOT_KNOWN_METHOD,
    SIN,
    bw,
    entry,
    fw,
    make_error_test,
    mul_fw,
    neg_bw,
)

# An op with an argument named `grad`: `grad` is that argument, and the output's
# gradient is grads[0] or grad_result.
TRACE_BW = "trace_backward(Tensor grad, SymInt[] sizes) -> Tensor"


def trace_bw(formula: str, forward: str = "auto_linear") -> str:
    """A backward formula for the argument `grad` on line 3."""
    return entry(
        TRACE_BW,
        "sample: grad=any(), sizes=[3, 4]",
        f"grad: {formula}",
        f"result: {forward}",
    )


BACKWARD_CASES = [
    (
        "backward_formula_without_grad",
        neg_bw("self.cos()"),
        [bw("backward formula does not use the gradient of the output")],
    ),
    (
        "backward_formula_constant",
        neg_bw("0"),
        [bw("backward formula does not use the gradient of the output")],
    ),
    (
        "grad_in_a_multi_output_op",
        entry(MAX, "self: grad", "values: self_t"),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear",
            "spec.yaml:2: error: max.dim: self: this op has several outputs: use grads[i] or grad_<output>",
        ],
    ),
    (
        "grads_in_a_single_output_op",
        neg_bw("grads[0]"),
        [bw("this op has one output: use 'grad'")],
    ),
    (
        "grad_argument_as_the_output_gradient",
        trace_bw("grad.diagonal().sum()"),
        [
            (
                "spec.yaml:3: error: trace_backward: grad: backward formula does not "
                "use the gradient of the output: 'grad' is this op's argument grad; "
                "write grads[0] or grad_result for the gradient of the output"
            )
        ],
    ),
    (
        "grads_out_of_range_where_an_argument_is_grad",
        trace_bw("grads[1].diagonal().sum()"),
        [
            (
                "spec.yaml:3: error: trace_backward: grad: 'grads' is the tuple of "
                "the outputs' gradients: this op has one output, write grads[0]"
            )
        ],
    ),
    (
        "grads_out_of_range",
        entry(MAX, "self: grads[2]", "values: self_t", "indices: auto_linear"),
        [
            (
                "spec.yaml:2: error: max.dim: self: 'grads' is the tuple of the "
                "outputs' gradients: index it with a constant, grads[0] to grads[1]"
            )
        ],
    ),
    (
        "grad_argument_in_a_forward_formula",
        trace_bw(
            "grads[0].diagonal().sum()", "torch.ops.aten.trace_backward(grad, sizes)"
        ),
        [
            (
                "spec.yaml:4: error: trace_backward: result: forward formula uses "
                "'grad'; write grad_p or grad_t"
            )
        ],
    ),
    (
        "misspelt_grad_of_named_output",
        entry(
            MAX,
            "self: grad_vals",
            "output_differentiability: [true, false]",
            "values: self_t",
        ),
        [
            "spec.yaml:2: error: max.dim: self: unknown name 'grad_vals'; did you mean 'grad_values'?"
        ],
    ),
    (
        "mixing_grads_and_grad_name",
        entry(
            MAX,
            "self: grads[0] + grad_values",
            "output_differentiability: [true, false]",
            "values: self_t",
        ),
        [
            "spec.yaml:1: error: max.dim: backward formulas mix grad_<name> and grads; use one style"
        ],
    ),
    (
        "mixing_grads_and_grad",
        entry(
            MAX,
            "self: grads[0] + grad",
            "output_differentiability: [true, false]",
            "values: self_t",
        ),
        [
            "spec.yaml:1: error: max.dim: backward formulas mix grad and grads; use one style"
        ],
    ),
    (
        "tangent_in_a_backward_formula",
        neg_bw("grad * self_t"),
        [bw("tangents are not available in a backward formula")],
    ),
    (
        "primal_in_a_backward_formula",
        neg_bw("grad * self_p"),
        [bw("backward formulas use plain argument names: write self")],
    ),
    (
        # The second error follows from the first: 'self' does have a formula.
        "tangent_in_a_backward_formula_cascade",
        entry(
            MUL,
            "self: grad * other_t",
            MUL_BW[1],
            "result: self_t * other_p + other_t * self_p",
        ),
        [
            "spec.yaml:2: error: mul.Tensor: self: tangents are not available in a backward formula"
        ],
    ),
    (
        # The second error follows from the first: 'self' does have a formula.
        "broken_backward_formula_cascade_auto_element_wise",
        entry(SIN, "self: grad * slef.cos()", "result: auto_element_wise"),
        ["spec.yaml:2: error: sin: self: unknown name 'slef'; did you mean 'self'?"],
    ),
]


FORMULA_CASES = [
    (
        "syntax_error",
        neg_bw("grad * (self.cos()"),
        [bw("invalid syntax in formula: '(' was never closed (column 8)")],
    ),
    (
        "syntax_error_dangling_operator",
        neg_bw("grad *"),
        [bw("invalid syntax in formula: invalid syntax")],
    ),
    (
        "syntax_error_two_names",
        neg_bw("grad self"),
        [bw("invalid syntax in formula: invalid syntax (column 6)")],
    ),
    ("empty_formula", neg_bw("''"), [bw("formula is empty")]),
    (
        "unknown_name",
        neg_bw("grad * slef.cos()"),
        [bw("unknown name 'slef'; did you mean 'self'?")],
    ),
    (
        "unknown_name_forward",
        mul_fw("self_t * othr_p + other_t * self_p"),
        [fw("unknown name 'othr_p'; did you mean 'other_p'?")],
    ),
    (
        "bare_tensor_argument_in_a_forward_formula",
        mul_fw("self_t * other + other_t * self_p"),
        [fw("forward formula uses 'other'; write other_p or other_t")],
    ),
    (
        "tangent_of_a_non_differentiable_input",
        entry(
            MUL,
            "non_differentiable: [other]",
            MUL_BW[0],
            "result: self_t * other_p + other_t * self_p",
        ),
        [fw("'other' is not differentiable: it has no tangent")],
    ),
    (
        "grad_in_a_forward_formula",
        mul_fw("grad * other_p"),
        [fw("'grad' is not available in a forward formula; use <input>_t")],
    ),
    (
        "primal_of_a_non_tensor",
        entry(MAX, *MAX_BW, "values: self_t.sum(dim_p)"),
        ["spec.yaml:4: error: max.dim: values: 'dim' is not a tensor: write dim"],
    ),
    (
        "call_len",
        neg_bw("grad * len(self)"),
        [bw("calls to builtins are not allowed ('len')")],
    ),
    (
        "call_eval",
        neg_bw('grad * eval("1")'),
        [bw("calls to builtins are not allowed ('eval')")],
    ),
    (
        "call_import",
        neg_bw('grad * __import__("os")'),
        [bw("calls to builtins are not allowed ('__import__')")],
    ),
    (
        "builtin_as_a_value",
        neg_bw("grad * print"),
        [bw("builtin 'print' is not allowed in formulas")],
    ),
    (
        "dunder_attribute",
        neg_bw("grad * self.__class__"),
        [bw("dunder attribute '__class__' is not allowed")],
    ),
    (
        "dunder_name",
        neg_bw("grad * __builtins__"),
        [bw("dunder name '__builtins__' is not allowed")],
    ),
    (
        "private_attribute",
        neg_bw("grad * self._version"),
        [bw("private attribute '_version' is not allowed")],
    ),
    (
        # A lambda can only be called here, so the call is refused first.
        "lambda",
        neg_bw('"(lambda x: x)(grad)"'),
        ["spec.yaml:2: error: neg: self: lambdas are not allowed"],
    ),
    (
        "lambda_as_an_argument",
        neg_bw('"torch.where(grad > 0, grad, lambda: 0)"'),
        [bw("lambdas are not allowed")],
    ),
    (
        "list_comprehension",
        neg_bw('"torch.stack([g for g in grad])"'),
        [bw("comprehensions are not allowed")],
    ),
    (
        "generator_expression",
        neg_bw("torch.stack(g for g in grad)"),
        [bw("comprehensions are not allowed")],
    ),
    ("walrus", neg_bw("(g := grad) * g"), [bw("':=' (walrus) is not allowed")]),
    ("f_string", neg_bw("grad * f'{self}'"), [bw("f-strings are not allowed")]),
    (
        "dict_display",
        neg_bw('"grad * {1: 2}[1]"'),
        [bw("dict displays are not allowed")],
    ),
    ("set_display", neg_bw('"grad * {1}"'), [bw("set displays are not allowed")]),
    ("bytes_literal", neg_bw("grad * b'x'"), [bw("bytes literals are not allowed")]),
    ("await", neg_bw("await grad"), [bw("'await' is not allowed")]),
    ("yield", neg_bw("(yield grad)"), [bw("'yield' is not allowed")]),
    (
        "starred_argument",
        neg_bw("torch.mul(*grad)"),
        [bw("starred expressions are not allowed")],
    ),
    (
        "double_starred_argument",
        neg_bw("torch.mul(grad, **self)"),
        [bw("'**' arguments are not allowed")],
    ),
    (
        "calling_a_subscript",
        neg_bw("grad * [self.cos][0]()"),
        [
            "spec.yaml:2: error: neg: self: method 'cos' must be called, not used as a value"
        ],
    ),
    ("calling_a_value", neg_bw("grad(self)"), [bw("'grad' is not a function")]),
    (
        "unknown_function",
        neg_bw("unbroadcst(grad, self)"),
        [bw("unknown function 'unbroadcst'; did you mean 'unbroadcast'?")],
    ),
    (
        "helper_as_a_value",
        neg_bw("grad * unbroadcast"),
        [bw("helper 'unbroadcast' must be called, not used as a value")],
    ),
    (
        "unknown_torch_function",
        neg_bw("grad * torch.sinn(self)"),
        [bw("'torch' has no 'sinn'; did you mean 'sin'?")],
    ),
    (
        "unknown_torch_linalg_function",
        neg_bw("grad * torch.linalg.nrm(self)"),
        [bw("'torch.linalg' has no 'nrm'; did you mean 'norm'?")],
    ),
    (
        "unknown_aten_operator",
        neg_bw("grad * torch.ops.aten.sinn(self)"),
        [bw("'torch.ops.aten' has no 'sinn'; did you mean 'sin'?")],
    ),
    (
        "torch_load",
        neg_bw("grad * torch.load('x')"),
        [bw(f"'torch.load' is not allowed in formulas: it {NOT_KNOWN}")],
    ),
    (
        "torch_save",
        neg_bw("torch.save(grad, 'x')"),
        [bw(f"'torch.save' is not allowed in formulas: it {NOT_KNOWN}")],
    ),
    (
        "torch_set_function",
        neg_bw("torch.get_default_dtype() * grad"),
        [bw(f"'torch.get_default_dtype' is not allowed in formulas: it {NOT_KNOWN}")],
    ),
    (
        "torch_C",
        neg_bw("grad * torch._C"),
        [bw("private name 'torch._C' is not allowed in formulas")],
    ),
    (
        "torch_C_function",
        neg_bw("grad * torch._C._foo(self)"),
        [bw("private name 'torch._C._foo' is not allowed in formulas")],
    ),
    (
        "torch_as_a_value",
        neg_bw("grad * torch"),
        [bw("'torch' is only allowed as `torch.<function>`")],
    ),
    (
        "torch_outside_the_namespaces",
        neg_bw("grad * torch.hub.load('a', 'b')"),
        [
            bw(
                f"'torch.hub.load' is outside the allowed namespaces ({ALLOWED_NAMESPACES})"
            )
        ],
    ),
    (
        "torch_tensor_in_place_method",
        neg_bw("grad * torch.Tensor.add_(self, 1)"),
        [
            "spec.yaml:2: error: neg: self: 'torch.Tensor.add_' is not allowed in formulas (it mutates)"
        ],
    ),
    (
        # The suggestion is 'cross', where 'cos' was meant.
        "unknown_tensor_method",
        neg_bw("grad * self.coss()"),
        [bw("Tensor has no attribute 'coss'; did you mean 'cos'?")],
    ),
    (
        "in_place_method",
        neg_bw("grad.mul_(2)"),
        [bw("'.mul_' is not allowed in formulas (it mutates or escapes)")],
    ),
    (
        "escaping_method",
        neg_bw("grad * self.tolist()"),
        [bw(f"'.tolist' is not allowed in formulas: it {NOT_KNOWN_METHOD}")],
    ),
    (
        "parenthesised_300_deep",
        neg_bw("(" * 300 + "grad" + ")" * 300),
        [bw("invalid syntax in formula: too many nested parentheses (column 201)")],
    ),
    (
        "longer_than_4000_characters",
        neg_bw("-" * 100000 + "grad"),
        [bw("formula is longer than 4000 characters")],
    ),
    (
        "too_deep_for_the_parser",
        neg_bw("-" * 3000 + "grad"),
        [bw("formula is nested more than 150 levels deep")],
    ),
    (
        "nested_more_than_150_levels",
        neg_bw("-" * 200 + "grad"),
        [bw("formula is nested more than 150 levels deep")],
    ),
    (
        "method_chain_300_long",
        neg_bw("grad" + ".cos()" * 300),
        [bw("formula is nested more than 150 levels deep")],
    ),
    (
        # A flat sum nests to the left in the tree, so its length counts as depth.
        "flat_sum_of_200_terms",
        neg_bw("grad" + " + grad" * 199),
        [bw("formula is nested more than 150 levels deep")],
    ),
    (
        "multi_line_formula",
        entry(NEG, "self: |", "  grad", "  * 2", "result: auto_linear"),
        [bw("invalid syntax in formula: invalid syntax (column 1)")],
    ),
]


# Mistakes that once slipped through: each must be caught.
CAUGHT_CASES = [
    (
        "torch_in_place_function",
        "- name: sin(Tensor self) -> Tensor\n  self: grad * torch.sin_(self)\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: 'torch.sin_' is not allowed in formulas (it mutates)"
        ],
    ),
    (
        "aten_in_place_overload",
        "- name: sin(Tensor self) -> Tensor\n  self: grad * torch.ops.aten.sin_.default(self)\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: 'torch.ops.aten.sin_.default' is not allowed in formulas (it mutates)"
        ],
    ),
    (
        "out_keyword",
        "- name: sin(Tensor self) -> Tensor\n  self: torch.mul(grad, self.cos().conj(), out=grad)\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: keyword 'out=' is not allowed in formulas (it mutates)"
        ],
    ),
    (
        "inplace_keyword",
        "- name: sin(Tensor self) -> Tensor\n  self: torch.nn.functional.relu(grad, inplace=True)\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: keyword 'inplace=' is not allowed in formulas (it mutates)"
        ],
    ),
    (
        "tuple_key_with_wrong_count",
        "- name: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  self, other: (grad, grad, grad)\n  result: self_t * other_p + other_t * self_p\n",
        [
            "spec.yaml:2: error: mul.Tensor: self, other: formula gives 3 gradients for 2 inputs"
        ],
    ),
    (
        "method_used_as_a_value",
        "- name: sin(Tensor self) -> Tensor\n  self: grad * self.cos\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: method 'cos' must be called, not used as a value"
        ],
    ),
    (
        "data_attribute",
        "- name: sin(Tensor self) -> Tensor\n  self: grad.data * self.cos()\n  result: auto_element_wise\n",
        [
            "spec.yaml:2: error: sin: self: '.data' is not allowed in formulas (it mutates or escapes)"
        ],
    ),
]

CASES = BACKWARD_CASES + FORMULA_CASES + CAUGHT_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)


@pytest.mark.parametrize("limit", [400, 1000, 20000])
def test_depth_error_does_not_depend_on_the_recursion_limit(limit):
    """The parser runs out of stack at a depth set by the process's recursion
    limit, which other code in the same process may have raised (torch's compiler
    does): a too-deep formula gets the same message at any limit."""
    from dualgen.tools.check.formula import FormulaError, Scope, parse_formula

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        with pytest.raises(FormulaError, match="nested more than 150 levels deep"):
            parse_formula("-" * 3000 + "grad", Scope(frozenset({"grad"})))
    finally:
        sys.setrecursionlimit(previous)
