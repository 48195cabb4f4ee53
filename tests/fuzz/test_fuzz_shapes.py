"""The generator's newer shapes (real values written into complex views, tangents
of another precision, in-place view ops of expanded and empty duals,
normalizations and linear algebra in nested programs): that a fixed-seed run
writes each of them, and that the judges flag a wrong tangent or dtype in each.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch
from hypothesis import given, settings

from . import judge as judge_module
from . import nested as nested_module
from .found_programs import (
    C128,
    F32,
    F64,
    WRITE_THROUGH_CONJ_VIEW_OF_A_BASE_DUAL_AT_ONE_LEVEL,
)
from .generate import FUZZ_PROFILE, Weights, nested_programs, programs
from .interpret import DUALGEN, NATIVE, VarState
from .judge import AGREE, DUALGEN_WRONG, judge
from .nested import FD_ONLY, Parts, finite_differences, judge_nested, run_torch_func
from .program import NestedProgram, Program, step_info

FLAT_SHAPES = {
    "complex view write",
    "mask",
    "mixed tangent dtype",
    "in-place view op",
    "empty or expanded dual",
    "normalization or linear algebra",
}
NESTED_SHAPES = {
    "complex view write",
    "complex and real inputs",
    "input dual at one level",
    "mask",
    "normalization or linear algebra",
}
# What each shape's programs must show in their text (the label is the
# recipe's word; this is the program's).
IN_PLACE_VIEW_OP = re.compile(
    r"^x\d+\.(unsqueeze_|squeeze_|transpose_|swapdims_|swapaxes_|t_|as_strided_)\(",
    re.MULTILINE,
)
DTYPE = re.compile(r"dtype=torch\.(\w+)")
MASK = re.compile(r"relu|clamp|where\(x|maximum|minimum|abs\(|hardtanh|masked_fill\(x")
COMPLEX_VIEW_PARTS = (
    ".conj()",
    ".as_strided(",
    "storage_offset() + ",
    "fill_(",
    "alpha=2",
    "] = ",
    ".real",
    "torch.view_as_real(",
    "torch.stack([",
)


def _generate(strategy, n: int) -> list:
    out = []

    @settings(FUZZ_PROFILE, derandomize=True, max_examples=n)
    @given(strategy)
    def collect(program):
        out.append(program)

    collect()
    return out


@pytest.fixture(scope="module")
def flat_programs():
    return _generate(programs(), 120)


@pytest.fixture(scope="module")
def nested():
    return _generate(nested_programs(), 60)


def _mixed(line: str) -> bool:
    """A make_dual of a literal whose tangent literal has another dtype."""
    return "make_dual(torch." in line and len(set(DTYPE.findall(line))) > 1


def _writes(program) -> bool:
    return any(step_info(line).kind != "assign" for line in program.lines)


def test_flat_programs_have_each_new_shape(flat_programs):
    kinds = Counter(k for p in flat_programs for k in p.kinds)
    assert FLAT_SHAPES <= set(kinds), kinds
    for p in flat_programs:
        text = str(p)
        if "mixed tangent dtype" in p.kinds:
            assert any(_mixed(line) for line in p.lines), text
        if "in-place view op" in p.kinds:
            assert IN_PLACE_VIEW_OP.search(text), text
        if "mask" in p.kinds:
            assert MASK.search(text), text
        if "normalization or linear algebra" in p.kinds:
            assert FD_ONLY.search(text), text
        if "complex view write" in p.kinds:
            assert _writes(p) and ("complex" in text or "j)" in text), text
    leaves = "\n".join(str(p) for p in flat_programs)
    assert re.search(r"\[(:, )?\d::2\], torch\.zeros\(\((2, )?0,?\)", leaves)
    for dtype in ("bfloat16", "float16", "complex64"):
        assert f"dtype=torch.{dtype})" in leaves, dtype


def test_complex_view_writes_take_each_form():
    weights = Weights(complex_writes=12)
    written = "\n".join(str(p) for p in _generate(programs(weights=weights), 60))
    missing = [part for part in COMPLEX_VIEW_PARTS if part not in written]
    assert not missing, missing


def test_nested_programs_have_each_new_shape(nested):
    kinds = Counter(k for p in nested for k in p.kinds)
    assert NESTED_SHAPES <= set(kinds), kinds
    for p in nested:
        if "complex and real inputs" in p.kinds:
            x0, x1 = p.inputs
            assert "complex128" in x0.primal and "float64" in x1.primal, str(p)
    for p in nested:
        if "input dual at one level" in p.kinds:
            assert any("None" in (i.outer, i.inner) for i in p.inputs), str(p)
            assert NestedProgram.from_code(str(p)) == p  # prints as it parses
    linalg = [p for p in nested if "normalization or linear algebra" in p.kinds]
    assert all(FD_ONLY.search(str(p)) for p in linalg)


def test_a_zero_weight_turns_a_shape_off():
    off = Weights(complex_writes=0, masks=0, view_inplace=0, linalg=0)
    off = Weights(**{**off.__dict__, "mixed_leaf": 0, "odd_leaf": 0})
    kinds = {k for p in _generate(programs(weights=off), 40) for k in p.kinds}
    assert not kinds & FLAT_SHAPES, kinds
    assert Weights.parse(["linalg=3", "masks=0"]) == Weights(linalg=3, masks=0)
    with pytest.raises(ValueError):
        Weights.parse(["nonsense=1"])


def test_setitem_with_a_tensor_index_parses():
    # `x[torch.tensor([0, 1])] = v`: the index holds brackets of its own.
    step = step_info("x5.conj()[torch.tensor([0, 1])] = x3")
    assert (step.kind, step.mutates, step.target, step.reads) == (
        "setitem",
        "x5",
        "x5.conj()",
        ("x3",),
    )


# A wrong dualgen: a stand-in that is right (native's trace for flat programs,
# finite differences for nested ones, so these tests hold whatever state the
# runtime is in), with one variable's tangent changed.


def _corrupted_run(monkeypatch, step: int, name: str, change=None) -> None:
    real_run = judge_module.run

    def run(program, engine):
        if engine is not DUALGEN:
            return real_run(program, engine)
        trace = real_run(program, NATIVE)
        if change is not None:
            state = trace.states[step][name]
            trace.states[step][name] = VarState(state.value, change(state.tangent))
        return trace

    monkeypatch.setattr(judge_module, "run", run)


FLAT_CASES = {
    "complex view write": (
        f"""
        x0 = fwAD.make_dual(torch.tensor([[0.5, -1.0j], [1.5, 0.25]], {C128}), torch.tensor([[1.0j, 0.5], [-0.5, 1.0]], {C128}))
        x1 = fwAD.make_dual(torch.tensor([0.5, 1.0], {F64}), torch.tensor([1.0, -2.0], {F64}))
        x2 = (x0 * x0).conj()
        x2[0:1:2].copy_(torch.log(x1.square() + 1).sum())
        """,
        "x2",
    ),
    "mixed tangent dtype": (
        f"""
        x0 = fwAD.make_dual(torch.tensor([0.5, -1.0], {F64}), torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
        x1 = torch.relu(x0)
        """,
        "x1",
    ),
    "in-place view op": (
        f"""
        x0 = fwAD.make_dual(torch.tensor([[0.5], [1.0]], {F32}).expand(2, 3), torch.tensor([[1.0], [-2.0]], {F32}).expand(2, 3))
        x0.t_()
        """,
        "x0",
    ),
    "normalization or linear algebra": (
        f"""
        x0 = fwAD.make_dual(torch.tensor([[0.5, -1.0], [2.0, 1.0]], {F64}), torch.tensor([[1.0, 0.5], [-0.5, 0.25]], {F64}))
        x1 = torch.linalg.det(x0 + 4 * torch.eye(2))
        """,
        "x1",
    ),
}


OTHER_DTYPE = {
    torch.float64: torch.float32,
    torch.float32: torch.float64,
    torch.complex128: torch.complex64,
}


def _case(kind: str) -> tuple[Program, int, str]:
    code, name = FLAT_CASES[kind]
    program = Program.from_code(code)
    return program, len(program.lines) - 1, name


@pytest.mark.parametrize("kind", FLAT_CASES)
def test_flat_judge_flags_a_wrong_tangent(kind, monkeypatch):
    program, last, name = _case(kind)
    with monkeypatch.context() as patched:
        _corrupted_run(patched, last, name)
        assert judge(program).outcome == AGREE  # right as it is ...
    _corrupted_run(monkeypatch, last, name, lambda t: t.flip(-1) * 1.5 + 0.25)
    assert judge(program).outcome == DUALGEN_WRONG  # ... and not when changed


@pytest.mark.parametrize("kind", FLAT_CASES)
def test_flat_judge_flags_a_wrong_tangent_dtype(kind, monkeypatch):
    program, last, name = _case(kind)
    _corrupted_run(monkeypatch, last, name, lambda t: t.to(OTHER_DTYPE[t.dtype]))
    verdict = judge(program)
    assert (
        not verdict.ok and verdict.finding.aspect == "tangent dtype"
    ), verdict.report()


def test_mixed_tangent_dtype_is_compared_past_make_dual(monkeypatch):
    # relu of a float64 value with a float32 tangent: native's is float64, so a
    # float32 one (what dualgen once gave) is flagged.
    program = Program.from_code(f"""
        x0 = fwAD.make_dual(torch.tensor([0.5, -1.0], {F64}), torch.tensor([1.0, 2.0], {F32}))
        x1 = torch.relu(x0)
        x2 = x1.sin()
        """)
    _corrupted_run(monkeypatch, 1, "x1", lambda t: t.float())
    verdict = judge(program)
    assert verdict.finding.aspect == "tangent dtype", verdict.report()
    assert not verdict.ok


def test_half_precision_tangents_are_judged_at_their_tolerance(monkeypatch):
    program = Program.from_code(f"""
        x0 = fwAD.make_dual(torch.tensor([0.5, -1.0, 2.0], {F64}), torch.tensor([1.0, 2.0, 0.5], dtype=torch.bfloat16))
        x1 = x0.sum()
        """)
    # bfloat16 rounding (2^-8 relative) passes; 20% does not.
    _corrupted_run(monkeypatch, 1, "x1", lambda t: t * (1 + 2**-8))
    assert judge(program).outcome == AGREE
    _corrupted_run(monkeypatch, 1, "x1", lambda t: t * 1.2)
    assert not judge(program).ok


NESTED_CASES = {
    "complex view write": (
        f"""
        x0 = input(torch.tensor([[0.5, -1.0j, 1.0], [1.5, 0.25, 2.0j]], {C128}), v=torch.tensor([[1.0j, 0.5, 1.0], [-0.5, 1.0, 0.5j]], {C128}), u=torch.tensor([[0.5, 1.0, -1.0j], [1.0, 0.25j, 1.0]], {C128}))
        x1 = input(torch.tensor([0.5, 1.0, -1.5], {F64}), v=torch.tensor([1.0, -2.0, 0.5], {F64}), u=torch.tensor([0.25, 1.0, 1.0], {F64}))
        x2 = torch.stack([x0, x0], 0) + x0
        x3 = x2.as_strided((2,), (1,), x2.storage_offset() + 4)
        x3[0].add_(torch.linalg.vector_norm(x1.square() + 0.5), alpha=2)
        """,
        "x2",
    ),
    "input dual at one level": (
        WRITE_THROUGH_CONJ_VIEW_OF_A_BASE_DUAL_AT_ONE_LEVEL,
        "x2",
    ),
    "normalization or linear algebra": (
        f"""
        x0 = input(torch.tensor([[0.5, -1.0], [2.0, 1.0]], {F64}), v=torch.tensor([[1.0, 0.5], [-0.5, 0.25]], {F64}), u=torch.tensor([[0.25, 2.0], [1.0, 1.5]], {F64}))
        x1 = torch.linalg.det(x0 + 4 * torch.eye(2))
        x2 = torch.nn.functional.layer_norm(x0, (2,))
        """,
        "x1",
    ),
}


def _nested_corrupted(monkeypatch, name: str, change=None) -> None:
    def run_dualgen(p):
        result = finite_differences(p)
        for state in result.states:
            if name in state and change is not None:
                state[name] = change(state[name])
        return result

    monkeypatch.setattr(nested_module, "run_dualgen", run_dualgen)


@pytest.mark.parametrize("kind", NESTED_CASES)
@pytest.mark.parametrize("part", ["ju", "jv", "hvp"])
def test_nested_judge_flags_a_wrong_part(kind, part, monkeypatch):
    code, name = NESTED_CASES[kind]
    program = NestedProgram.from_code(code)
    with monkeypatch.context() as patched:
        _nested_corrupted(patched, name)
        assert judge_nested(program).ok, judge_nested(program).report()

    def change(parts: Parts) -> Parts:
        t = getattr(parts, part)  # None: zero (a part that is linear)
        wrong = (torch.zeros_like(parts.value) if t is None else t).flip(-1) + 0.25
        return parts._replace(**{part: wrong})

    _nested_corrupted(monkeypatch, name, change)
    assert judge_nested(program).outcome == DUALGEN_WRONG


def test_nested_linalg_sharing_torch_funcs_defect_is_flagged(monkeypatch):
    # dualgen giving torch.func's u^T H v for det (wrong by finite differences)
    # is not excused by agreeing with torch.func.
    code, _ = NESTED_CASES["normalization or linear algebra"]
    program = NestedProgram.from_code(code)
    monkeypatch.setattr(nested_module, "run_dualgen", run_torch_func)
    verdict = judge_nested(program)
    assert verdict.outcome == DUALGEN_WRONG, verdict.report()
    assert verdict.finding.aspect == "u^T H v"
