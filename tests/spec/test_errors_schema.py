"""Errors in an entry as a whole: its `name:` schema checked against torch's, duplicate
entries, unknown keys, which inputs have backward formulas, non_differentiable and
output_differentiability, convention, and keys whose value is not a formula.
"""

from __future__ import annotations

from spec_error_cases import (
    ADD,
    ADD_,
    MAX,
    MAX_BW,
    MUL,
    MUL_BW,
    NEG,
    SIN,
    SIN_OK,
    UNKNOWN_KEY,
    VIEW,
    entry,
    make_error_test,
)

SCHEMA_CASES = [
    (
        "unknown_operator",
        entry("mull.Tensor(Tensor self, Tensor other) -> Tensor", "self: grad"),
        [
            "spec.yaml:1: error: mull.Tensor: torch has no operator overload aten::mull.Tensor; did you mean 'mul.Tensor'?"
        ],
    ),
    (
        "unknown_overload",
        entry("mul.Tensr(Tensor self, Tensor other) -> Tensor"),
        [
            "spec.yaml:1: error: mul.Tensr: torch has no operator overload aten::mul.Tensr; did you mean 'mul.Tensor'?"
        ],
    ),
    (
        "unknown_operator_no_suggestion",
        entry("zzzqqq(Tensor self) -> Tensor"),
        ["spec.yaml:1: error: zzzqqq: torch has no operator overload aten::zzzqqq"],
    ),
    (
        "schema_without_arguments",
        entry("sin"),
        [
            "spec.yaml:1: error: sin: malformed schema: expected '(' after the operator name"
        ],
    ),
    (
        "schema_without_returns",
        entry("sin(Tensor self)"),
        [
            "spec.yaml:1: error: sin(Tensor self): malformed schema: expected '->' and the returns after the arguments"
        ],
    ),
    (
        "schema_unclosed_arguments",
        entry("sin(Tensor self -> Tensor"),
        [
            "spec.yaml:1: error: sin(Tensor self -> Tensor: malformed schema: unclosed argument list"
        ],
    ),
    (
        "schema_bad_operator_name",
        entry("sin x(Tensor self) -> Tensor"),
        [
            "spec.yaml:1: error: sin x(Tensor self) -> Tensor: malformed schema: bad operator name 'sin x'"
        ],
    ),
    (
        "schema_argument_without_name",
        entry("sin(Tensor) -> Tensor"),
        [
            "spec.yaml:1: error: sin(Tensor) -> Tensor: malformed schema: argument 'Tensor' has no name"
        ],
    ),
    (
        "schema_malformed_type",
        entry("sin(Tensor% self) -> Tensor"),
        [
            "spec.yaml:1: error: sin(Tensor% self) -> Tensor: malformed schema: malformed type 'Tensor%'"
        ],
    ),
    (
        "schema_unbalanced_bracket",
        entry("sin(Tensor self]) -> Tensor"),
        [
            "spec.yaml:1: error: sin(Tensor self]) -> Tensor: malformed schema: unbalanced ']'"
        ],
    ),
    (
        "schema_bad_return_name",
        entry("sin(Tensor self) -> Tensor 1x"),
        [
            "spec.yaml:1: error: sin(Tensor self) -> Tensor 1x: malformed schema: bad return name '1x'"
        ],
    ),
    (
        "wrong_argument_name",
        entry("mul.Tensor(Tensor self, Tensor othr) -> Tensor"),
        [
            f"spec.yaml:1: error: mul.Tensor: schema does not match torch: argument 2 is 'Tensor othr', torch has 'Tensor other' (torch: {MUL})"
        ],
    ),
    (
        "renamed_in_torch_not_a_mapping",
        entry(
            "mul.Tensor(Tensor self, Tensor othr) -> Tensor",
            "renamed_in_torch: othr -> other",
        ),
        [
            "spec.yaml:2: error: mul.Tensor(Tensor self, Tensor othr) -> Tensor: renamed_in_torch must be `name=torch_name, ...` (argument names)"
        ],
    ),
    (
        "renamed_in_torch_names_no_argument",
        entry(
            "mul.Tensor(Tensor self, Tensor other) -> Tensor",
            "renamed_in_torch: oter=other",
        ),
        [
            "spec.yaml:2: error: mul.Tensor: renamed_in_torch: 'oter' is no argument of the entry"
        ],
    ),
    (
        "renamed_in_torch_other_names_still_checked",
        entry(
            "mul.Tensor(Tensor slf, Tensor othr) -> Tensor",
            "renamed_in_torch: othr=other",
        ),
        [
            f"spec.yaml:1: error: mul.Tensor: schema does not match torch: argument 1 is 'Tensor slf', torch has 'Tensor self' (torch: {MUL})"
        ],
    ),
    (
        "torch_releases_malformed",
        entry(
            "mul.Tensor(Tensor self, Tensor other) -> Tensor",
            'torch_releases: "2.14+"',
        ),
        [
            'spec.yaml:2: error: mul.Tensor(Tensor self, Tensor other) -> Tensor: torch_releases must be ">=X.Y", "<X.Y" or both, comma-separated (the first release with the overload, the first without it)'
        ],
    ),
    (
        "torch_releases_of_the_installed_release_still_checked",
        entry(
            "mull.Tensor(Tensor self, Tensor other) -> Tensor",
            'torch_releases: ">=2.0"',
            "self: grad",
        ),
        [
            "spec.yaml:1: error: mull.Tensor: torch has no operator overload aten::mull.Tensor; did you mean 'mul.Tensor'?"
        ],
    ),
    (
        "wrong_argument_type",
        entry(MAX.replace("int dim", "SymInt dim")),
        [
            f"spec.yaml:1: error: max.dim: schema does not match torch: argument 2 is 'SymInt dim', torch has 'int dim' (torch: {MAX})"
        ],
    ),
    (
        "wrong_default",
        entry(MAX.replace("keepdim=False", "keepdim=True")),
        [
            f"spec.yaml:1: error: max.dim: schema does not match torch: argument 3 is 'bool keepdim=True', torch has 'bool keepdim=False' (torch: {MAX})"
        ],
    ),
    (
        "missing_default",
        entry(MAX.replace("keepdim=False", "keepdim")),
        [
            f"spec.yaml:1: error: max.dim: schema does not match torch: argument 3 is 'bool keepdim', torch has 'bool keepdim=False' (torch: {MAX})"
        ],
    ),
    (
        # Unclear: both sides print the same; the missing `*` is not named.
        "missing_keyword_only_marker",
        entry(ADD.replace("*, ", "")),
        [
            "spec.yaml:1: error: add.Tensor: schema does not match torch: argument 3 'alpha' is keyword-only (after '*') in torch (torch: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor)"
        ],
    ),
    (
        "missing_alias_annotation_on_an_argument",
        entry("view(Tensor self, SymInt[] size) -> Tensor(a)"),
        [
            f"spec.yaml:1: error: view: schema does not match torch: argument 1 is 'Tensor self', torch has 'Tensor(a) self' (torch: {VIEW})"
        ],
    ),
    (
        "missing_alias_annotation_on_the_return",
        entry("view(Tensor(a) self, SymInt[] size) -> Tensor"),
        [
            f"spec.yaml:1: error: view: schema does not match torch: the returns differ (torch: {VIEW})"
        ],
    ),
    (
        "missing_write_annotation_in_place",
        entry(ADD_.replace("Tensor(a!)", "Tensor")),
        [
            f"spec.yaml:1: error: add_.Tensor: schema does not match torch: argument 1 is 'Tensor self', torch has 'Tensor(a!) self' (torch: {ADD_})"
        ],
    ),
    (
        "extra_argument",
        entry("sin(Tensor self, int x) -> Tensor"),
        [
            f"spec.yaml:1: error: sin: schema does not match torch: the spec has the extra argument 'int x' (torch: {SIN})"
        ],
    ),
    (
        "missing_argument",
        entry("mul.Tensor(Tensor self) -> Tensor"),
        [
            f"spec.yaml:1: error: mul.Tensor: schema does not match torch: torch has the extra argument 'Tensor other' (torch: {MUL})"
        ],
    ),
    (
        "wrong_return_names",
        entry(MAX.replace("values", "a").replace("indices", "b")),
        [
            f"spec.yaml:1: error: max.dim: schema does not match torch: the returns differ (torch: {MAX})"
        ],
    ),
    (
        "out_overload",
        entry("sin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
        [
            "spec.yaml:1: error: sin.out: out= overloads take no formulas; write the functional entry"
        ],
    ),
    (
        "duplicate_entry",
        SIN_OK + SIN_OK,
        ["spec.yaml:4: error: sin: duplicate entry (first at line 1)"],
    ),
    (
        "duplicate_entry_with_aten_prefix",
        SIN_OK + SIN_OK.replace("name: ", "name: aten::"),
        ["spec.yaml:4: error: sin: duplicate entry (first at line 1)"],
    ),
]


KEY_CASES = [
    (
        "unknown_key",
        entry(SIN, "self: grad * self.cos().conj()", "reslt: auto_element_wise"),
        [
            "spec.yaml:1: error: sin: no forward formula for output 'result'; give one, or auto_element_wise / auto_linear",
            f"spec.yaml:3: error: sin: unknown key 'reslt': {UNKNOWN_KEY}; did you mean 'result'?",
        ],
    ),
    (
        "unknown_key_misspelt_meta_key",
        entry(SIN, "non_differentible: [self]"),
        [
            "spec.yaml:1: error: sin: input 'self' has no backward formula; add 'self: ...' or list it under non_differentiable",
            f"spec.yaml:2: error: sin: unknown key 'non_differentible': {UNKNOWN_KEY}; did you mean 'non_differentiable'?",
        ],
    ),
    (
        "unknown_key_in_a_tuple_key",
        entry(MUL, "self, othr: (grad, grad)"),
        [
            "spec.yaml:1: error: mul.Tensor: input 'other' has no backward formula; add 'other: ...' or list it under non_differentiable",
            "spec.yaml:1: error: mul.Tensor: input 'self' has no backward formula; add 'self: ...' or list it under non_differentiable",
            f"spec.yaml:2: error: mul.Tensor: unknown key 'othr': {UNKNOWN_KEY}; did you mean 'other'?",
        ],
    ),
    (
        "unknown_key_without_suggestion",
        entry(*(MAX, *MAX_BW), "result0: self_t"),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'values'; give one, or auto_element_wise / auto_linear",
            f"spec.yaml:4: error: max.dim: unknown key 'result0': {UNKNOWN_KEY}",
        ],
    ),
    (
        # Wrong: 'values' is an output; the problem is the tuple key.
        "tuple_key_of_outputs",
        entry(MAX, "self: grad_values", "values, indices: self_t"),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear",
            "spec.yaml:1: error: max.dim: no forward formula for output 'values'; give one, or auto_element_wise / auto_linear",
            f"spec.yaml:3: error: max.dim: unknown key 'values': {UNKNOWN_KEY}; did you mean 'values'?",
        ],
    ),
    (
        "tensor_input_without_backward_formula",
        entry(MUL, MUL_BW[0], "result: self_t * other_p"),
        [
            "spec.yaml:1: error: mul.Tensor: input 'other' has no backward formula; add 'other: ...' or list it under non_differentiable"
        ],
    ),
    (
        "backward_formula_for_a_non_tensor",
        entry(MAX, *MAX_BW, "dim: grad_values", "values: self_t"),
        [
            "spec.yaml:4: error: max.dim: 'dim' is not a tensor: only tensor inputs have gradients"
        ],
    ),
    (
        "two_backward_formulas_for_one_input",
        entry(MUL, *MUL_BW, "self, other: (grad, grad)", "result: self_t * other_p"),
        [
            "spec.yaml:4: error: mul.Tensor: 'other' has two backward formulas",
            "spec.yaml:4: error: mul.Tensor: 'self' has two backward formulas",
        ],
    ),
    (
        "non_differentiable_unknown_argument",
        entry(SIN, "non_differentiable: [selff]"),
        [
            "spec.yaml:1: error: sin: input 'self' has no backward formula; add 'self: ...' or list it under non_differentiable",
            "spec.yaml:2: error: sin: non_differentiable names 'selff', which is not an argument",
        ],
    ),
    (
        "convention_unknown",
        entry(SIN, "convention: straight_through", "self: grad", "result: self_t"),
        [
            "spec.yaml:2: error: sin: convention must be one of: straight-through, implicit-reparameterization"
        ],
    ),
    (
        "convention_not_a_word",
        entry(SIN, "convention: [straight-through]", "self: grad", "result: self_t"),
        [
            "spec.yaml:2: error: sin: convention must be one of: straight-through, implicit-reparameterization"
        ],
    ),
    (
        "non_differentiable_non_tensor",
        entry(MAX, "non_differentiable: [self, dim]"),
        [
            "spec.yaml:2: error: max.dim: non_differentiable names 'dim', which is not a tensor"
        ],
    ),
    (
        "non_differentiable_with_backward_formula",
        entry(SIN, "non_differentiable: [self]", "self: grad", "result: auto_linear"),
        [
            "spec.yaml:3: error: sin: 'self' has a backward formula and is listed as non_differentiable"
        ],
    ),
    (
        # Reported twice, then the default [true, true] is used in its place.
        "output_differentiability_wrong_length",
        entry(
            MAX,
            "self: grad_values",
            "values: self_t",
            "output_differentiability: [true]",
        ),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear",
            "spec.yaml:4: error: max.dim: output_differentiability has 1 values for 2 outputs",
        ],
    ),
    (
        "output_differentiability_not_bools",
        entry(
            MAX,
            "self: grad_values",
            "values: self_t",
            "output_differentiability: [1, 0]",
        ),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear",
            "spec.yaml:4: error: max.dim: output_differentiability must be a list of true/false",
        ],
    ),
    (
        "output_differentiability_not_a_list",
        entry(
            MAX, "self: grad_values", "values: self_t", "output_differentiability: true"
        ),
        [
            "spec.yaml:1: error: max.dim: no forward formula for output 'indices'; give one, or auto_element_wise / auto_linear",
            "spec.yaml:4: error: max.dim: output_differentiability must be a list of true/false",
        ],
    ),
    (
        "output_differentiability_of_a_non_tensor",
        entry(
            "size.int(Tensor self, int dim) -> int",
            "non_differentiable: [self]",
            "output_differentiability: [true]",
        ),
        [
            "spec.yaml:3: error: size.int: output 'result' is not a tensor and cannot be differentiable"
        ],
    ),
    (
        "formula_is_null",
        entry(NEG, "self:", "result: auto_linear"),
        ["spec.yaml:2: error: neg: 'self' must be a formula"],
    ),
    (
        "formula_is_a_bool",
        entry(NEG, "self: true", "result: auto_linear"),
        ["spec.yaml:2: error: neg: 'self' must be a formula"],
    ),
    (
        "formula_is_a_list",
        entry(NEG, "self: [grad]", "result: auto_linear"),
        ["spec.yaml:2: error: neg: 'self' must be a formula"],
    ),
]


# Mistakes that once slipped through: each must be caught.
CAUGHT_CASES = [
    (
        "no_differentiable_output",
        "- name: sin(Tensor self) -> Tensor\n  self: grad\n  output_differentiability: [false]\n",
        [
            "spec.yaml:2: error: sin: backward formulas given, but no output is differentiable"
        ],
    ),
    (
        "non_differentiable_twice",
        "- name: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  self: grad * other\n  non_differentiable: [other, other]\n  result: self_t * other_p\n",
        ["spec.yaml:3: error: mul.Tensor: non_differentiable names 'other' twice"],
    ),
]

CASES = SCHEMA_CASES + KEY_CASES + CAUGHT_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)
