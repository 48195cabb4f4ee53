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


PYTHON = ["__init__.py", "jvp.py", "registry.py", "vjp.py"]
CPP = [f"cpp/jvp_{i}.cpp" for i in range(SHARDS)] + ["cpp/registry.cpp"]


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
