"""Where the CLI's default paths come from: the project around the working directory.

`dualgen generate` and `dualgen validate` run from anywhere inside a project: the
root is the nearest directory, from the working directory up, that holds the spec
(derivatives.yaml) beside a mark of a dualgen project. Defaults are relative to it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SPEC_NAME = "derivatives.yaml"
OUT_NAME = "generated"
# Specs generated with the project's own spec, each into a package of the output
# (<out>/<package>/): the rules of torch's own custom ops, which a dispatch mode
# sees whole, checked against the schemas the named modules register.
COMPANION_SPECS = {
    "specs/torch_custom_ops.yaml": ("torch_custom_ops", ("torch.nn.attention.varlen",)),
}


class NotInProject(Exception):
    """No project root around the working directory: the user must name the spec."""

    def __init__(self, start: Path):
        super().__init__(
            f"not inside a dualgen project (no {SPEC_NAME} in {start} or its "
            f"parents); pass --spec"
        )


def find_root(start: Path) -> Path | None:
    """The nearest directory from `start` up that is a project root, or None.

    Above `start`, a derivatives.yaml alone is not enough: PyTorch's own
    tools/autograd/derivatives.yaml (or a stray copy in a home directory) must not
    become the spec of everything below it. In `start` itself, a derivatives.yaml
    is the one the user means, mark or not, as when the default was `./`.
    """
    start = start.resolve()
    if (start / SPEC_NAME).is_file():
        return start
    for directory in start.parents:
        if (directory / SPEC_NAME).is_file() and _marked(directory):
            return directory
    return None


def _marked(directory: Path) -> bool:
    """Whether `directory` looks like a dualgen project: generated/ output, or a
    pyproject.toml that names dualgen (as the project or a dependency)."""
    if (directory / OUT_NAME).is_dir():
        return True
    try:
        text = (directory / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"\bdualgen\b", text) is not None


def installed_spec() -> Path | None:
    """The spec an installed package's kernels were generated from (the wheel
    carries it beside them, setup.py), or None in a checkout."""
    import dualgen.generated

    path = Path(dualgen.generated.__file__).resolve().parent / SPEC_NAME
    return path if path.is_file() else None


def default_paths(spec: Path | None, out: Path | None, cwd: Path) -> tuple[Path, Path]:
    """(spec, out): explicit paths as given (relative to `cwd`); missing ones from
    the project root, shown relative to `cwd` so messages stay short and clickable.
    Raise NotInProject when a default is needed and there is no root; outside a
    project, --out defaults to generated/ beside the given spec."""
    if spec is not None and out is not None:
        return spec, out
    root = find_root(cwd)
    if root is None:
        if spec is None:
            raise NotInProject(cwd.resolve())
        return spec, spec.parent / OUT_NAME
    return (
        spec if spec is not None else _relative(root / SPEC_NAME, cwd),
        out if out is not None else _relative(root / OUT_NAME, cwd),
    )


def _relative(path: Path, cwd: Path) -> Path:
    return Path(os.path.relpath(path, cwd.resolve()))
