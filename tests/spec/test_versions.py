"""`dualgen --version`'s lines (dualgen.versions): dualgen's version, torch's, and
the kernels a new process runs with the C++ extension's state, each from a fresh
process with the environment given."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from dualgen import cpp, torch_support
from dualgen.versions import pyproject_version, torch_line

ROOT = Path(__file__).resolve().parents[2]

VARIABLES = ("DUALGEN_KERNELS", "DUALGEN_BUILD_DIR")
NOT_BUILT = "extension not built: run `dualgen build`"
EXTENSION = {
    "built": f"extension built for torch {torch.__version__}",
    "stale": "extension stale: its sources or torch changed since it was built, "
    "run `dualgen build`",
    "missing": NOT_BUILT,
}


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    done = subprocess.run(
        command,
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def report(**env: str) -> list[str]:
    code = "from dualgen.versions import report; print(report())"
    done = _run([sys.executable, "-c", code], **env)
    assert done.stderr == ""  # describes a stale or missing build without warning
    return done.stdout.splitlines()


def test_versions_and_the_kernels_chosen_by_the_extension_state():
    state = cpp.state()
    chosen = "cpp" if state == "built" else "python"
    assert report() == [
        f"dualgen {version('dualgen')}",
        f"torch {torch.__version__}",
        f"kernels: {chosen} ({EXTENSION[state]})",
        "torch internals: all found",
    ]


def test_a_missing_extension_means_python_kernels(tmp_path):
    lines = report(DUALGEN_BUILD_DIR=str(tmp_path))
    assert lines[2] == f"kernels: python ({NOT_BUILT})"


@pytest.mark.parametrize("chosen", ["python", "cpp"])
def test_dualgen_kernels_decides(tmp_path, chosen):
    lines = report(DUALGEN_KERNELS=chosen, DUALGEN_BUILD_DIR=str(tmp_path))
    unusable = ", unusable" if chosen == "cpp" else ""
    assert lines[2] == (
        f"kernels: {chosen}, set by DUALGEN_KERNELS{unusable} ({NOT_BUILT})"
    )


def test_a_wrong_dualgen_kernels_is_named(tmp_path):
    lines = report(DUALGEN_KERNELS="fortran", DUALGEN_BUILD_DIR=str(tmp_path))
    assert lines[2] == (
        "kernels: none, DUALGEN_KERNELS=fortran is not one of cpp, python "
        f"({NOT_BUILT})"
    )


def test_dualgen_version_prints_the_report():
    done = _run([sys.executable, "-m", "dualgen", "--version"])
    assert done.stdout.splitlines() == report()


def test_a_checkout_never_installed_reads_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert pyproject_version(text) == version("dualgen")
    other = '[project]\nname = "other"\nversion = "9.9"\n'
    assert pyproject_version(other) is None


def test_an_untested_torch_is_named():
    major, minor = max(torch_support.TESTED)
    assert torch_line(f"{major}.{minor}.1+cpu") == f"torch {major}.{minor}.1+cpu"
    tested = torch_support.tested_range()
    assert torch_line("99.0.0") == (
        f"torch 99.0.0 (untested: dualgen is tested with torch {tested})"
    )
