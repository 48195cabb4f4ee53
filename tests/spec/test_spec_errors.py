"""Spec mistakes and the exact errors `dualgen generate` reports for them.

Each case is an id, an inline spec, and the errors expected on stderr, one string
per error, in order (the final `N error(s); out left unchanged` line is checked
too).
Every failed run must exit 1, print no traceback, write nothing on stdout, and
leave an existing output directory byte-for-byte as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dualgen.tools.cli import main

SIN = "sin(Tensor self) -> Tensor"
NEG = "neg(Tensor self) -> Tensor"
MUL = "mul.Tensor(Tensor self, Tensor other) -> Tensor"
MAX = "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
VIEW = "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
ADD = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
ADD_ = "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"


NOT_KNOWN = (
    "is no aten operator and not on the allowlist of pure Python functions "
    "(tools/admissible.py), so it is not known to be pure tensor math"
)
NOT_KNOWN_METHOD = NOT_KNOWN.replace("Python functions", "Tensor methods")


def entry(name: str, *lines: str) -> str:
    """One spec entry: `- name: <name>` then its other keys, one per line."""
    return f"- name: {name}\n" + "".join(f"  {line}\n" for line in lines)


SIN_OK = entry(SIN, "self: grad * self.cos().conj()", "result: auto_element_wise")
MUL_BW = ("self: grad * other.conj()", "other: grad * self.conj()")
MAX_BW = ("self: grad_values", "output_differentiability: [true, false]")


def neg_bw(formula: str) -> str:
    """A backward formula on line 2 (auto_linear adds no follow-on error)."""
    return entry(NEG, f"self: {formula}", "result: auto_linear")


def mul_fw(formula: str) -> str:
    """A forward formula on line 4."""
    return entry(MUL, *MUL_BW, f"result: {formula}")


def bw(message: str) -> str:
    return f"spec.yaml:2: error: neg: self: {message}"


def fw(message: str) -> str:
    return f"spec.yaml:4: error: mul.Tensor: result: {message}"


def not_linear(why: str) -> str:
    return fw(f"forward formula is not linear in the tangents: {why}")


UNKNOWN_KEY = "not an argument, an output or one of name, non_differentiable, output_differentiability, sample"
ALLOWED_NAMESPACES = (
    "torch, torch.linalg, torch.special, torch.fft, torch.nn.functional, torch.ops.aten"
)

YAML_CASES = [
    # -- the file and its YAML ---------------------------------------------
    (
        "yaml_unclosed_flow_list",
        entry(SIN, "self: [grad"),
        [
            "spec.yaml:3: error: invalid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence)"
        ],
    ),
    (
        "yaml_bad_indentation",
        "- name: a\n b: c\n",
        [
            "spec.yaml:2: error: invalid YAML: expected <block end>, but found '<block mapping start>' (while parsing a block collection)"
        ],
    ),
    (
        "yaml_tab_indentation",
        f"- name: {SIN}\n\tself: grad\n",
        [
            "spec.yaml:2: error: invalid YAML: found character '\\t' that cannot start any token (while scanning for the next token)"
        ],
    ),
    (
        "yaml_undefined_alias",
        entry(SIN, "self: *nope"),
        ["spec.yaml:2: error: invalid YAML: found undefined alias 'nope'"],
    ),
    (
        # Unclear: only the problem half of PyYAML's message is kept.
        "yaml_two_documents",
        SIN_OK + "---\n" + entry("cos(Tensor self) -> Tensor"),
        [
            "spec.yaml:4: error: invalid YAML: expected a single document in the stream but found another document"
        ],
    ),
    (
        # Unclear: two lines, wrong line number, PyYAML's "<unicode string>" mark.
        "yaml_control_character",
        entry(SIN, "self: grad\x07"),
        ["spec.yaml:2: error: invalid YAML: character '\\x07' is not allowed"],
    ),
    (
        "empty_file",
        "",
        ["spec.yaml:1: error: spec is empty: expected a list of entries"],
    ),
    (
        "only_comments",
        "# nothing here\n",
        ["spec.yaml:1: error: spec is empty: expected a list of entries"],
    ),
    (
        "top_level_mapping",
        f"name: {SIN}\nself: grad\n",
        [
            "spec.yaml:1: error: spec must be a list of entries (each starting with '- name:')"
        ],
    ),
    (
        "top_level_scalar",
        "hello\n",
        [
            "spec.yaml:1: error: spec must be a list of entries (each starting with '- name:')"
        ],
    ),
    (
        "entry_is_a_scalar",
        f"- {SIN}\n",
        ["spec.yaml:1: error: each entry must be a mapping with a 'name:' key"],
    ),
    (
        "entry_is_a_list",
        SIN_OK + "- [a, b]\n",
        ["spec.yaml:4: error: each entry must be a mapping with a 'name:' key"],
    ),
    (
        "missing_name",
        "- self: grad * self.cos().conj()\n  result: auto_element_wise\n",
        ["spec.yaml:1: error: <entry>: entry has no 'name:' key"],
    ),
    (
        "name_is_a_list",
        "- name: [sin]\n",
        ["spec.yaml:1: error: <entry>: 'name' must be an aten schema string"],
    ),
    (
        "name_is_a_number",
        "- name: 3\n",
        ["spec.yaml:1: error: 3: 'name' must be an aten schema string"],
    ),
    (
        "duplicate_key",
        entry(
            SIN,
            "self: grad * self.cos().conj()",
            "self: grad",
            "result: auto_element_wise",
        ),
        ["spec.yaml:3: error: duplicate key 'self' (first at line 2)"],
    ),
    (
        "key_is_a_list",
        entry(SIN, "[a]: b"),
        ["spec.yaml:2: error: keys must be plain names"],
    ),
    (
        "merge_key",
        "- &e\n  " + SIN_OK[2:] + "- <<: *e\n  name: cos(Tensor self) -> Tensor\n",
        ["spec.yaml:5: error: YAML merge keys ('<<') are not allowed"],
    ),
    (
        "value_is_a_mapping",
        entry(SIN, "self: {a: b}"),
        ["spec.yaml:2: error: 'self': expected a formula or a list, not a mapping"],
    ),
    (
        "value_is_a_nested_list",
        entry(SIN, "self: [[grad]]"),
        ["spec.yaml:2: error: 'self': list items must be plain values"],
    ),
    (
        "recursive_anchor",
        entry(SIN, "self: &a [*a]"),
        ["spec.yaml:2: error: 'self': list items must be plain values"],
    ),
    (
        "python_tag_refused_not_run",
        '- name: !!python/object/apply:os.system ["touch pwned"]\n',
        [
            "spec.yaml:1: error: 'name': explicit YAML tag !!python/object/apply:os.system is not allowed"
        ],
    ),
    (
        "python_tag_on_a_formula",
        entry(SIN, 'self: !!python/object/apply:os.system ["touch pwned"]'),
        [
            "spec.yaml:2: error: 'self': explicit YAML tag !!python/object/apply:os.system is not allowed"
        ],
    ),
    (
        # Unclear: the root is a list; it is its tag that is refused.
        "python_tag_on_the_root",
        '!!python/object/apply:os.system ["touch pwned"]\n',
        [
            "spec.yaml:1: error: explicit YAML tag !!python/object/apply:os.system is not allowed"
        ],
    ),
    (
        # Unclear: the entry is a mapping; it is its tag that is refused.
        "python_tag_on_an_entry",
        "- !!python/object:os.system {name: x}\n",
        [
            "spec.yaml:1: error: explicit YAML tag !!python/object:os.system is not allowed"
        ],
    ),
    (
        "custom_tag",
        f"- name: !foo {SIN}\n",
        ["spec.yaml:1: error: 'name': explicit YAML tag !foo is not allowed"],
    ),
    (
        "set_tag",
        entry(SIN, "self: !!set {a}"),
        ["spec.yaml:2: error: 'self': explicit YAML tag !!set is not allowed"],
    ),
    (
        "binary_junk",
        b"\x00\x01\x02\xff\xfe\x80junk\n",
        ["spec.yaml:1: error: file is not UTF-8 text"],
    ),
    (
        "not_utf8_on_line_2",
        f"- name: {SIN}\n".encode() + b"  self: grad \xff\n",
        ["spec.yaml:2: error: file is not UTF-8 text"],
    ),
    (
        "utf16",
        entry(SIN).encode("utf-16"),
        ["spec.yaml:1: error: file is not UTF-8 text"],
    ),
    (
        "deeply_nested_lists",
        "[" * 5000,
        ["spec.yaml:1: error: invalid YAML: nesting is too deep"],
    ),
    (
        "deeply_nested_closed_lists",
        "[" * 5000 + "]" * 5000,
        ["spec.yaml:1: error: invalid YAML: nesting is too deep"],
    ),
    (
        "deeply_nested_mappings_in_an_entry",
        entry(SIN, "self: " + "{a: " * 5000 + "b" + "}" * 5000),
        ["spec.yaml:1: error: invalid YAML: nesting is too deep"],
    ),
]

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
        [bw("formula is nested too deeply")],
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

SEVERAL_CASES = [
    (
        "several_errors_sorted_by_line",
        entry("cos(Tensor self) -> Tensor", "self: grad * slef", "result: auto_linear")
        + entry("mull.Tensor(Tensor self, Tensor other) -> Tensor")
        + entry(SIN, "self: self.cos()", "result: auto_element_wise")
        + mul_fw("self_t * other_t"),
        [
            "spec.yaml:2: error: cos: self: unknown name 'slef'; did you mean 'self'?",
            "spec.yaml:4: error: mull.Tensor: torch has no operator overload aten::mull.Tensor; did you mean 'mul.Tensor'?",
            "spec.yaml:6: error: sin: self: backward formula does not use the gradient of the output",
            "spec.yaml:11: error: mul.Tensor: result: forward formula is not linear in the tangents: it multiplies two tangents",
        ],
    ),
    (
        "several_load_errors",
        entry(SIN, "self: a", "self: b")
        + "- 3\n"
        + entry("cos(Tensor self) -> Tensor", "result: x", "result: y"),
        [
            "spec.yaml:3: error: duplicate key 'self' (first at line 2)",
            "spec.yaml:4: error: each entry must be a mapping with a 'name:' key",
            "spec.yaml:7: error: duplicate key 'result' (first at line 6)",
        ],
    ),
    (
        # Load errors stop the run before the entries are checked: line 1 is unseen.
        "load_errors_hide_entry_errors",
        entry("mull.Tensor(Tensor self, Tensor other) -> Tensor")
        + entry(SIN, "self: a", "self: b"),
        [
            "spec.yaml:1: error: mull.Tensor: torch has no operator overload aten::mull.Tensor; did you mean 'mul.Tensor'?",
            "spec.yaml:4: error: duplicate key 'self' (first at line 3)",
        ],
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
        "auto_element_wise_on_a_view",
        "- name: view(Tensor(a) self, SymInt[] size) -> Tensor(a)\n  self: grad.reshape(self.shape)\n  result: auto_element_wise\n  sample: size=[4]\n",
        [
            "spec.yaml:3: error: view: result: auto_element_wise is not valid here: a view's tangent is the same view of its input's tangent; write auto_linear or leave the formula out"
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

# The `sample:` vocabulary for `dualgen validate`.
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
            "spec.yaml:5: error: add.Tensor: sample: 'other' is a statistic of 'self'; list it under non_differentiable (its rule takes it as a function of 'self')"
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
            "spec.yaml:5: error: add.Tensor: sample: 'other' is a statistic of 'self', which the sample does not give as a tensor"
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

CASES = (
    SAMPLE_CASES
    + CAUGHT_CASES
    + YAML_CASES
    + SCHEMA_CASES
    + KEY_CASES
    + BACKWARD_CASES
    + FORMULA_CASES
    + FORWARD_CASES
    + SEVERAL_CASES
)
SENTINEL = b"sentinel \x00\xff bytes\n"


def _generate(tmp_path: Path, monkeypatch, spec_text: str | bytes) -> int:
    monkeypatch.chdir(tmp_path)
    data = spec_text if isinstance(spec_text, bytes) else spec_text.encode("utf-8")
    Path("spec.yaml").write_bytes(data)
    return main(["generate", "--spec", "spec.yaml", "--out", "out"])


def test_case_ids_are_unique():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "spec_text, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_spec_error_is_reported_exactly(
    tmp_path, monkeypatch, capsys, spec_text, expected
):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sentinel.py").write_bytes(SENTINEL)

    assert _generate(tmp_path, monkeypatch, spec_text) == 1

    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.out == ""
    summary = f"{len(expected)} error(s); out left unchanged"
    assert captured.err == "".join(f"{line}\n" for line in [*expected, summary])
    # The output is untouched, and nothing else appeared (no tag was executed).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "spec.yaml"]
    assert [p.name for p in out.iterdir()] == ["sentinel.py"]
    assert (out / "sentinel.py").read_bytes() == SENTINEL


def test_failed_run_creates_no_output_directory(tmp_path, monkeypatch, capsys):
    assert (
        _generate(tmp_path, monkeypatch, entry("mull.Tensor(Tensor self) -> Tensor"))
        == 1
    )
    assert not (tmp_path / "out").exists()
    assert capsys.readouterr().err.endswith("1 error(s); out left unchanged\n")


def test_error_path_is_the_spec_path_as_given(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    Path("specs/d.yaml").write_text("- 3\n")
    assert main(["generate", "--spec", "specs/d.yaml", "--out", "gen"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "specs/d.yaml:1: error: each entry must be a mapping with a 'name:' key",
        "1 error(s); gen left unchanged",
    ]


def test_unreadable_spec_exits_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--spec", "missing.yaml", "--out", "out"]) == 1
    assert capsys.readouterr().err == (
        "missing.yaml: error: cannot read spec: No such file or directory\n"
        "out left unchanged\n"
    )
    assert not (tmp_path / "out").exists()


def test_valid_tiny_spec_generates(tmp_path, monkeypatch, capsys):
    spec = SIN_OK + entry(MUL, *MUL_BW, "result: self_t * other_p + other_t * self_p")
    assert _generate(tmp_path, monkeypatch, spec) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == "out: written (2 entries, 4 kernels)\n"
    assert (tmp_path / "out" / "jvp.py").is_file()
    assert "def sin_default" in (tmp_path / "out" / "jvp.py").read_text()
