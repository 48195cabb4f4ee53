"""How spec errors are reported together: several in one run, sorted by line, load
errors before entry errors; no output directory made by a failed run; and the
tiny valid spec that does generate. Checks that the ids of all the test_errors_*
cases are unique.
"""

from __future__ import annotations

from spec_error_cases import (
    MUL,
    MUL_BW,
    SIN,
    SIN_OK,
    _generate,
    all_case_ids,
    entry,
    make_error_test,
    mul_fw,
)

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

CASES = SEVERAL_CASES

test_spec_error_is_reported_exactly = make_error_test(CASES)


def test_case_ids_are_unique():
    ids = all_case_ids()
    assert len(ids) == len(set(ids))


def test_failed_run_creates_no_output_directory(tmp_path, monkeypatch, capsys):
    assert (
        _generate(tmp_path, monkeypatch, entry("mull.Tensor(Tensor self) -> Tensor"))
        == 1
    )
    assert not (tmp_path / "out").exists()
    assert capsys.readouterr().err.endswith("1 error(s); out left unchanged\n")


def test_valid_tiny_spec_generates(tmp_path, monkeypatch, capsys):
    spec = SIN_OK + entry(MUL, *MUL_BW, "result: self_t * other_p + other_t * self_p")
    assert _generate(tmp_path, monkeypatch, spec) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == "out: written (2 entries, 4 kernels)\n"
    assert (tmp_path / "out" / "jvp.py").is_file()
    assert "def sin_default" in (tmp_path / "out" / "jvp.py").read_text()
