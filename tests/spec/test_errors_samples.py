"""Errors in the `sample:` vocabulary for `dualgen validate`: missing values,
domains, shapes, literals and statistics.
"""

from __future__ import annotations

from spec_error_cases import ADD, SIN_OK, VIEW, entry, make_error_test

SAMPLE_CASES = [
    (
        "sample_missing_a_required_value",
        entry(VIEW, "self: grad.reshape(self.shape)"),
        [
            "spec.yaml:1: error: view: sample: 'size' (SymInt[]) has no default; give it in every sample, e.g. `sample: size=...`"
        ],
    ),
    (
        "sample_missing_a_value_in_one_of_several",
        entry(
            VIEW,
            "self: grad.reshape(self.shape)",
            "sample:",
            "  - size=[4]",
            "  - self=any(4)",
        ),
        [
            "spec.yaml:3: error: view: sample: 'size' (SymInt[]) has no default; give it in every sample, e.g. `sample: size=...`"
        ],
    ),
    (
        "sample_unknown_domain",
        SIN_OK + "  sample: self=positve\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): unknown domain 'positve' (one of any, positive, unit, nonzero, distinct, bool, prob, above_one, invertible, spd, hermitian, index, unique_index, pivots)"
        ],
    ),
    (
        "sample_index_without_bound",
        SIN_OK + "  sample: self=index\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): index needs a bound: index(high=N)"
        ],
    ),
    (
        "sample_unique_index_too_many",
        SIN_OK + "  sample: self=unique_index(5, high=3)\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): high=3 cannot give 5 indices"
        ],
    ),
    (
        "sample_high_on_a_plain_domain",
        SIN_OK + "  sample: self=any(3, high=3)\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): only index domains take high="
        ],
    ),
    (
        "sample_names_no_argument",
        SIN_OK + "  sample: x=positive\n",
        ["spec.yaml:4: error: sin: sample: sample names 'x', which is not an argument"],
    ),
    (
        "sample_not_keywords",
        SIN_OK + "  sample: positive\n",
        [
            "spec.yaml:4: error: sin: sample: sample is not `name=value, ...`: 'positive'"
        ],
    ),
    (
        "sample_syntax_error",
        SIN_OK + "  sample: self=(\n",
        ["spec.yaml:4: error: sin: sample: sample is not `name=value, ...`: 'self=('"],
    ),
    (
        "sample_wrong_literal_type",
        entry(VIEW, "self: grad.reshape(self.shape)", "sample: size=1.5"),
        [
            "spec.yaml:3: error: view: sample: sample value for 'size' (SymInt[]) must be a list of ints"
        ],
    ),
    (
        "sample_negative_shape",
        SIN_OK + "  sample: self=any(-1, 2)\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): a shape cannot be negative"
        ],
    ),
    (
        "sample_bool_for_int",
        entry(
            "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
            "self: grad.transpose(dim0, dim1)",
            "sample: dim0=True",
        ),
        [
            "spec.yaml:3: error: transpose.int: sample: sample value for 'dim0' (int) must be an int"
        ],
    ),
    (
        "sample_tensor_literal_ragged",
        SIN_OK + "  sample: self=tensor([[1, 2], [3]])\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): tensor([...]) rows must have equal lengths"
        ],
    ),
    (
        "sample_tensor_literal_empty",
        SIN_OK + "  sample: self=tensor([])\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): write tensor([...]) with ints, bools or numbers (an empty tensor is a domain: any(0))"
        ],
    ),
    (
        "sample_tensor_literal_mixes_bools_and_numbers",
        SIN_OK + "  sample: self=tensor([True, 2])\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): tensor([...]) mixes bools and numbers"
        ],
    ),
    (
        "sample_tensor_literal_not_a_literal",
        SIN_OK + "  sample: self=tensor([x, 2])\n",
        [
            "spec.yaml:4: error: sin: sample: sample value for 'self' (Tensor): write tensor([...]) with ints, bools or numbers"
        ],
    ),
    (
        "sample_none_in_a_tensor_list",
        entry(
            "cat(Tensor[] tensors, int dim=0) -> Tensor",
            "tensors: grad.unbind()",
            "result: auto_linear",
            "sample: tensors=[any(2), None]",
        ),
        [
            "spec.yaml:4: error: cat: sample: sample value for 'tensors' (Tensor[]) must be a domain (any, positive, unit, nonzero, distinct, bool, prob, above_one, invertible, spd, hermitian, index, unique_index, pivots), optionally with a shape: positive(3, 4), or written out: tensor([0, 2])"
        ],
    ),
    (
        "sample_statistic_of_a_differentiable_argument",
        entry(
            ADD,
            "self: grad",
            "other: grad",
            "result: auto_linear",
            "sample: self=any(2, 3), other=mean_of(self, dims=[0], keepdim=True)",
        ),
        [
            "spec.yaml:5: error: add.Tensor: sample: 'other' is computed from 'self'; list it under non_differentiable (its rule takes it as a function of 'self')"
        ],
    ),
    (
        "sample_statistic_of_no_tensor",
        entry(
            ADD,
            "self: grad",
            "non_differentiable: [other]",
            "result: auto_linear",
            "sample: other=rstd_of(self, dims=[0])",
        ),
        [
            "spec.yaml:5: error: add.Tensor: sample: 'other' is computed from 'self', which the sample does not give as a tensor"
        ],
    ),
    (
        "sample_statistic_without_dims",
        entry(
            ADD,
            "self: grad",
            "non_differentiable: [other]",
            "result: auto_linear",
            "sample: self=any(2), other=mean_of(self, eps=0.1)",
        ),
        [
            "spec.yaml:5: error: add.Tensor: sample: sample value for 'other' (Tensor): write mean_of(source, dims=[...])"
        ],
    ),
]

CASES = SAMPLE_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)
