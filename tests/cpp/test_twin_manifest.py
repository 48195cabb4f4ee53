"""The manifest of hand-written C++ twins (runtime/csrc/dualgen/formulas/
twins.yaml) against what it describes: each twin has its Python helper, and each
is called by the parity test of its source, tests/cpp/test_twins_<stem>.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dualgen import formulas
from dualgen.tools.twins import load_twins, manifest_path

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
    helper = getattr(formulas, twin.name, None) or getattr(
        getattr(formulas, Path(twin.source).stem), f"_{twin.name}", None
    )
    assert callable(helper), f"{twin.location}: no Python helper {twin.name}"


@pytest.mark.parametrize("twin", TWINS, ids=[str(t.schema) for t in TWINS])
def test_each_twin_is_held_to_its_python_helper(twin):
    test_file = TESTS / f"test_twins_{Path(twin.source).stem}.py"
    assert test_file.is_file(), f"{twin.location}: no parity test {test_file.name}"
    assert twin.name in _names_called(
        test_file
    ), f"{twin.location}: {test_file.name} never calls the twin {twin.name}"


def test_each_binding_is_a_declared_twin(cpp_formulas):
    bound = {n for n in dir(cpp_formulas) if not n.startswith("_")}
    declared = {t.name for t in TWINS}
    overloads = {n for n in bound - declared if n.rsplit("_", 1)[0] in declared}
    assert bound - overloads == declared
