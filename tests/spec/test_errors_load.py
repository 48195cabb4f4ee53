"""Errors from loading the spec file: unreadable, not UTF-8, invalid or too deeply
nested YAML, the shape of the list and its entries, duplicate keys, merge keys and
explicit tags (refused, never run).
"""

from __future__ import annotations

from pathlib import Path

from spec_error_cases import SIN, SIN_OK, entry, make_error_test

from dualgen.tools.cli import main

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

CASES = YAML_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)


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
