"""What `dualgen --version` reports: dualgen's version, torch's (and whether it is a
release dualgen is tested with), which kernels a new process runs, with the
state of the C++ extension that decides it, and any torch internal dualgen needs
that the installed torch lacks (`torch_features`).

Reads the package metadata (pyproject.toml for a checkout never installed), the
environment and the extension's fingerprint; loads no extension and warns
nothing, so it can describe a stale or missing build.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from . import backend, cpp, torch_features, torch_support

_EXTENSION_STATES = {
    "built": "extension built for torch {torch}",
    "stale": "extension stale: its sources or torch changed since it was built, "
    "run `dualgen build`",
    "missing": "extension not built: run `dualgen build`",
}


def dualgen_version() -> str:
    """The installed distribution's version (what pip and bug reports see), else
    the version in the checkout's pyproject.toml."""
    try:
        return version("dualgen")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.exists():
        found = pyproject_version(pyproject.read_text())
        if found:
            return f"{found} (not installed)"
    return "(version unknown: not installed)"


def pyproject_version(pyproject: str) -> str | None:
    """`version` of the [project] table naming dualgen (by line: Python 3.10 has
    no tomllib)."""
    table, fields = None, {}
    for line in pyproject.splitlines():
        line = line.strip()
        if line.startswith("["):
            table = line
        elif table == "[project]" and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            fields[key] = value.strip('"')
    return fields.get("version") if fields.get("name") == "dualgen" else None


def torch_line(version: str = torch.__version__) -> str:
    """torch's version, and whether dualgen is tested with its release."""
    if torch_support.release(version) in torch_support.TESTED:
        return f"torch {version}"
    tested = torch_support.tested_range()
    return f"torch {version} (untested: dualgen is tested with torch {tested})"


def kernels() -> str:
    """Which kernels a new process runs and why: DUALGEN_KERNELS when set, else
    the C++ ones when the extension is built for this torch and its sources (the
    choice `backend.kernel_backend()` makes)."""
    state = cpp.state()
    extension = _EXTENSION_STATES[state].format(torch=torch.__version__)
    requested = os.environ.get(backend.VARIABLE)
    if requested is None:
        chosen = "cpp" if state == "built" else "python"
        return f"kernels: {chosen} ({extension})"
    if requested not in backend.BACKENDS:
        return (
            f"kernels: none, {backend.VARIABLE}={requested} is not one of "
            f"{', '.join(backend.BACKENDS)} ({extension})"
        )
    if requested == "cpp" and state != "built":
        return f"kernels: cpp, set by {backend.VARIABLE}, unusable ({extension})"
    return f"kernels: {requested}, set by {backend.VARIABLE} ({extension})"


def report() -> str:
    """The lines `dualgen --version` prints."""
    return "\n".join(
        [
            f"dualgen {dualgen_version()}",
            torch_line(),
            kernels(),
            torch_features.report_line(),
        ]
    )
