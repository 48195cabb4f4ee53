"""Golden tests: a tiny spec in, the exact generated text out.

After an intended change to the output, refresh with
`UPDATE_GOLDEN=1 python -m pytest tests/spec/test_golden.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dualgen.tools.cli import generate_files
from dualgen.tools.emit_cpp import SHARDS

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return generate_files(GOLDEN / "spec.yaml").files


PYTHON = ["__init__.py", "jvp.py", "registry.py", "taylor.py", "vjp.py"]
CPP = [f"cpp/jvp_{i}.cpp" for i in range(SHARDS)] + [
    "cpp/registry.cpp",
    "cpp/formulas.h",
    "cpp/formulas_bindings.cpp",
]


@pytest.mark.parametrize("name", PYTHON + CPP)
def test_generated_text_is_exactly_the_golden_file(files, name):
    expected_path = GOLDEN / f"{name}.golden"
    if os.environ.get("UPDATE_GOLDEN"):
        expected_path.parent.mkdir(exist_ok=True)
        expected_path.write_text(files[name], encoding="utf-8")
    assert files[name] == expected_path.read_text(encoding="utf-8")


def test_golden_output_is_exactly_these_files(files):
    assert sorted(files) == sorted(PYTHON + CPP)


def test_generated_text_is_black_stable(files):
    import black

    for name in PYTHON:
        assert black.format_str(files[name], mode=black.Mode()) == files[name], name


def test_every_file_names_the_module_and_template_that_wrote_it(files):
    """Each header names its writer as imported (a module moved to another package
    names its new place) and the template, which exists; the C++ layout is
    emit_cpp's own."""
    from dualgen.tools.emit_cpp import CppEmitter
    from dualgen.tools.emit_python import TEMPLATES, Emitter

    templates = {name: f"{name}.j2" for name in PYTHON} | {"__init__.py": "init.py.j2"}
    for name in PYTHON:
        template = templates[name]
        assert (TEMPLATES / template).is_file()
        writer = f"Written by {Emitter.__module__} from template {template}."
        assert writer in files[name].splitlines()[:5], name
    from dualgen.tools.emit_cpp.twins import render_twins

    for name in CPP:
        twins = name in ("cpp/formulas.h", "cpp/formulas_bindings.cpp")
        module = render_twins.__module__ if twins else CppEmitter.__module__
        writer = f"// Written by {module} (no template)."
        assert files[name].splitlines()[1] == writer, name
