"""Errors in forward formulas: not linear in the tangents, auto_element_wise where it
is not valid, views, outputs that take no forward formula or lack one, and
in-place entries.
"""

from __future__ import annotations

from spec_error_cases import (
    ADD,
    ADD_,
    MAX,
    MAX_BW,
    SIN,
    VIEW,
    entry,
    fw,
    make_error_test,
    mul_fw,
    not_linear,
)

FORWARD_CASES = [
    (
        "product_of_two_tangents",
        mul_fw("self_t * other_t"),
        [not_linear("it multiplies two tangents")],
    ),
    (
        "matmul_of_two_tangents",
        mul_fw("self_t @ other_t"),
        [not_linear("it multiplies two tangents")],
    ),
    (
        "tangent_plus_constant",
        mul_fw("self_t + 1"),
        [not_linear("'self_t + 1' adds a term without a tangent")],
    ),
    (
        "division_by_a_tangent",
        mul_fw("self_p / other_t"),
        [not_linear("it divides by a tangent")],
    ),
    ("no_tangent", mul_fw("self_p * other_p"), [not_linear("it uses no tangent")]),
    (
        "power_of_a_tangent",
        mul_fw("self_t ** 2"),
        [not_linear("it applies 'self_t ** 2' to a tangent")],
    ),
    (
        "floor_division_of_a_tangent",
        mul_fw("self_t // 2"),
        [not_linear("it applies 'self_t // 2' to a tangent")],
    ),
    ("comparing_tangents", mul_fw("self_t > 0"), [not_linear("it compares tangents")]),
    (
        "condition_on_a_tangent",
        mul_fw("self_p if self_t else other_t"),
        [not_linear("its condition depends on a tangent")],
    ),
    (
        "indexing_with_a_tangent",
        mul_fw("self_p[other_t]"),
        [not_linear("it indexes with a tangent")],
    ),
    (
        "not_of_a_tangent",
        mul_fw("not self_t"),
        [not_linear("it negates a tangent logically")],
    ),
    (
        "auto_element_wise_with_two_inputs",
        mul_fw("auto_element_wise"),
        [
            fw(
                "auto_element_wise is not valid here: it needs exactly one differentiable input, this entry has 2"
            )
        ],
    ),
    (
        "auto_element_wise_with_two_outputs",
        entry(
            MAX,
            "self: grad_values",
            "values: auto_element_wise",
            "indices: auto_element_wise",
        ),
        [
            "spec.yaml:3: error: max.dim: values: auto_element_wise is not valid here: it needs exactly one differentiable output",
            "spec.yaml:4: error: max.dim: indices: auto_element_wise is not valid here: it needs exactly one differentiable output",
        ],
    ),
    (
        "auto_element_wise_in_place",
        entry(
            "sin_(Tensor(a!) self) -> Tensor(a!)",
            "self: grad * self.cos().conj()",
            "result: auto_element_wise",
        ),
        [
            "spec.yaml:3: error: sin_: result: auto_element_wise is not valid here: in-place entries take it from their functional entry"
        ],
    ),
    (
        "forward_formula_on_a_view",
        entry(
            VIEW,
            "self: grad.reshape(self.shape)",
            "result: self_t.view(size)",
            "sample: size=[4]",
        ),
        [
            "spec.yaml:3: error: view: result: a view's tangent is the same view of its input's tangent; write auto_linear or leave the formula out"
        ],
    ),
    (
        "forward_formula_for_a_non_differentiable_output",
        entry(MAX, *MAX_BW, "values: self_t", "indices: self_t"),
        [
            "spec.yaml:5: error: max.dim: output 'indices' is not differentiable and takes no forward formula"
        ],
    ),
    (
        "forward_formula_for_a_non_tensor_output",
        entry("sin.int(int a) -> float", "result: a"),
        [
            "spec.yaml:2: error: sin.int: output 'result' is not differentiable and takes no forward formula"
        ],
    ),
    (
        "missing_forward_formula",
        entry(SIN, "self: grad * self.cos().conj()"),
        [
            "spec.yaml:1: error: sin: no forward formula for output 'result'; give one, or auto_element_wise / auto_linear"
        ],
    ),
    (
        "missing_forward_formula_of_a_second_output",
        entry(MAX, "self: grad_values", "values: self_t"),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear"
        ],
    ),
    (
        "in_place_entry_without_its_functional_entry",
        entry(ADD_),
        [
            "spec.yaml:1: error: add_.Tensor: in-place entry has no formulas and the spec has no entry 'add.Tensor' to take them from"
        ],
    ),
    (
        "in_place_entry_without_formulas_but_other_keys",
        entry(
            ADD,
            "self: grad",
            "other: scale_conj(grad, alpha)",
            "result: self_t + scale(other_t, alpha)",
        )
        + entry(ADD_, "non_differentiable: [other]"),
        [
            "spec.yaml:5: error: add_.Tensor: an in-place entry without formulas takes everything from 'add.Tensor'; remove the other keys"
        ],
    ),
]


# Mistakes that once slipped through: each must be caught.
CAUGHT_CASES = [
    (
        "auto_element_wise_on_a_view",
        "- name: view(Tensor(a) self, SymInt[] size) -> Tensor(a)\n  self: grad.reshape(self.shape)\n  result: auto_element_wise\n  sample: size=[4]\n",
        [
            "spec.yaml:3: error: view: result: auto_element_wise is not valid here: a view's tangent is the same view of its input's tangent; write auto_linear or leave the formula out"
        ],
    ),
]

# Formulas Python runs but C++ cannot print: every kernel has a C++ twin, so
# generation stops at the formula's line.
CPP_CASES = [
    (
        "tensor_mask_index_has_no_cpp_twin",
        mul_fw("self_t * other_p[other_p > 0].sum()"),
        [fw("no C++ twin: `other_p[other_p > 0]`: an index of ints only")],
    ),
    (
        "slice_has_no_cpp_twin",
        mul_fw("self_t.view(self_p.shape[::-1]) * other_p"),
        [fw("no C++ twin: cannot print Slice `::-1` as C++")],
    ),
    (
        # amax_grad is a Python helper (vjp's) with no C++ twin: a located
        # error, not a compile error in a generated shard.
        "helper_without_a_cpp_twin",
        mul_fw("amax_grad(self_t, self_p, self_p, [0], True) * other_p"),
        [
            fw(
                "no C++ twin: `amax_grad` has no C++ twin: write it in the helpers' "
                "one source, or by hand and declare it in "
                "runtime/csrc/dualgen/formulas/twins.yaml"
            )
        ],
    ),
]

CASES = FORWARD_CASES + CAUGHT_CASES + CPP_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)
