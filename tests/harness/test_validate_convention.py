"""`convention: straight-through`: an entry whose formulas state autograd's
straight-through estimator, not the derivative finite differences see, is held to
its backward formulas (the adjoint check) and not to finite differences."""

from __future__ import annotations

from validate_checks import HARNESS, entry, table, validate, validate_failing

ROUND = "round(Tensor self) -> Tensor"


def test_a_straight_through_entry_is_held_to_the_adjoint_only(
    tmp_path, monkeypatch, capsys
):
    spec = HARNESS + entry(
        ROUND, "convention: straight-through", "self: grad", "result: self_t"
    )
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "round", "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 0, out
    row = table(tmp_path / "r.md")["round"]
    assert [row[f"float64 {c}"] for c in ("slow", "fast", "adjoint", "jet")] == [
        "n/a",
        "n/a",
        "pass",
        "n/a",
    ]


def test_without_the_convention_finite_differences_reject_it(
    tmp_path, monkeypatch, capsys
):
    spec = HARNESS + entry(ROUND, "self: grad", "result: self_t")
    _, found = validate_failing(tmp_path, monkeypatch, capsys, spec, "--ops", "round")
    assert {(d, c) for _, d, c in found} == {
        ("float64", "slow"),
        ("float64", "fast"),
    }


def test_a_forward_formula_that_is_not_the_backwards_transpose_fails(
    tmp_path, monkeypatch, capsys
):
    spec = HARNESS + entry(
        ROUND, "convention: straight-through", "self: grad", "result: 2 * self_t"
    )
    _, found = validate_failing(tmp_path, monkeypatch, capsys, spec, "--ops", "round")
    assert {(d, c) for _, d, c in found} == {("float64", "adjoint")}
