"""The manifest of hand-written C++ twins (runtime/csrc/dualgen/formulas/
twins.yaml) against what it describes: each twin has its Python helper, and each
is called by a parity test (tests/cpp/test_twins_*.py); the bindings are exactly
the twins, hand-written and one-source (helpers/*.yaml)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dualgen import formulas, helper_basics
from dualgen.tools.check.helpers import load_helpers, sources_beside
from dualgen.tools.check.twins import load_twins, manifest_path

TESTS = Path(__file__).parent
TWINS = load_twins(manifest_path()).overloads


def _names_called(test_file: Path) -> frozenset[str]:
    """Attributes of `cpp_formulas` the file reads, and the helper names it passes
    as strings (`both(cpp_formulas, "name", ...)`)."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "cpp_formulas":
                names.add(
                    node.attr.rsplit("_", 1)[0]
                    if node.attr[-1].isdigit()
                    else node.attr
                )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return frozenset(names)


@pytest.mark.parametrize("twin", TWINS, ids=[str(t.schema) for t in TWINS])
def test_each_twin_has_its_python_helper(twin):
    stem = Path(twin.source).stem
    # basics.cpp's Python is the leaf module beside the formulas package
    module = helper_basics if stem == "basics" else getattr(formulas, stem)
    helper = getattr(formulas, twin.name, None) or getattr(module, twin.name, None)
    assert callable(helper), f"{twin.location}: no Python helper {twin.name}"


@pytest.mark.parametrize("twin", TWINS, ids=[str(t.schema) for t in TWINS])
def test_each_twin_is_held_to_its_python_helper(twin):
    called = set().union(*(_names_called(f) for f in TESTS.glob("test_twins_*.py")))
    assert twin.name in called, f"{twin.location}: no parity test calls {twin.name}"


def test_each_binding_is_a_declared_twin(cpp_formulas):
    bound = {n for n in dir(cpp_formulas) if not n.startswith("_")}
    root = Path(__file__).resolve().parents[2]
    one_source = load_helpers(sources_beside(root / "derivatives.yaml"), root)
    declared = {t.name for t in TWINS} | {h.name for h in one_source}
    overloads = {n for n in bound - declared if n.rsplit("_", 1)[0] in declared}
    assert bound - overloads == declared
