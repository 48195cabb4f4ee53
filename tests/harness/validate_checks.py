"""Shared by the test_validate_*.py modules: a small spec written to
derivatives.yaml in a temporary directory (the harness's own `alias` and `clone`
entries plus the entries under test), `dualgen validate` run there, and readers of
what it prints (`FAIL` lines) and writes (the Markdown report)."""

from __future__ import annotations

import re
from pathlib import Path

from dualgen.tools.cli import main

REPO = Path(__file__).resolve().parents[2]

DTYPES = ("float64", "complex128")
CHECKS = ("slow", "fast", "adjoint", "jet", "reverse")
COLUMNS = [f"{d} {c}" for d in DTYPES for c in CHECKS]
# The checks of a first-order formula. The jet check compares Taylor mode with
# nested levels, which share the formula: a wrong one is not its to see, and a
# small spec whose formulas call ops it has no entry for has no higher orders.
FIRST_ORDER = ("slow", "fast", "adjoint")
FIRST_ORDER_COLUMNS = [f"{d} {c}" for d in DTYPES for c in FIRST_ORDER]
JET_COLUMNS = [f"{d} jet" for d in DTYPES]


def entry(name: str, *lines: str) -> str:
    """One spec entry: `- name: <name>` then its other keys, one per line."""
    return f"- name: {name}\n" + "".join(f"  {line}\n" for line in lines) + "\n"


# The harness calls these itself (see derivatives.yaml): every test spec has them.
HARNESS = entry("alias(Tensor(a) self) -> Tensor(a)", "self: grad") + entry(
    "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    "self: grad",
    "result: auto_linear",
)
SIN = "sin(Tensor self) -> Tensor"
EXP = "exp(Tensor self) -> Tensor"
LOG = "log(Tensor self) -> Tensor"
MUL = "mul.Tensor(Tensor self, Tensor other) -> Tensor"
VIEW = "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
SIN_BW = "self: grad * self.cos().conj()"
MUL_BW = (
    "self: unbroadcast(grad * other.conj(), self)",
    "other: unbroadcast(grad * self.conj(), other)",
)
LOG_BW = "self: grad / self.conj()"

GOOD = (
    entry(SIN, SIN_BW, "result: auto_element_wise")
    + entry(EXP, "self: grad * result.conj()", "result: self_t * result")
    + entry(MUL, *MUL_BW, "result: self_t * other_p + other_t * self_p")
    + entry(LOG, "sample: self=positive", LOG_BW, "result: auto_element_wise")
    + entry(
        VIEW, "sample: self=any(3, 4), size=[4, 3]", "self: grad.reshape(self.shape)"
    )
    + HARNESS
)
GOOD_KERNELS = [
    ("sin", "functional"),
    ("sin_", "inplace"),
    ("exp", "functional"),
    ("exp_", "inplace"),
    ("mul.Tensor", "functional"),
    ("mul_.Tensor", "inplace"),
    ("log", "functional"),
    ("log_", "inplace"),
    ("view", "view"),
    ("alias", "view"),
    ("clone", "functional"),
]

FAIL_LINE = re.compile(r"FAIL (\S+) \[(\S+) (\S+)\] \(spec line (\d+)\): (.*)")


def validate(tmp_path: Path, monkeypatch, spec: str, *args: str) -> int:
    monkeypatch.chdir(tmp_path)
    Path("derivatives.yaml").write_text(spec)
    return main(["validate", "--no-progress", *args])


def validate_failing(tmp_path: Path, monkeypatch, capsys, spec: str, *args: str):
    """`dualgen validate` of a spec that some check rejects (exit status 1): what it
    printed, and its failures (see `failures`)."""
    rc = validate(tmp_path, monkeypatch, spec, *args)
    out, _ = capsys.readouterr()
    assert rc == 1, out
    return out, failures(out)


def line_of(spec: str, name: str) -> int:
    """The spec line of the entry `name`."""
    lines = spec.splitlines()
    return lines.index(f"- name: {name}") + 1


def failures(out: str) -> dict[tuple[str, str, str], tuple[int, str]]:
    """(kernel, dtype, check) -> (spec line, detail) for each FAIL line."""
    found = {}
    for line in out.splitlines():
        m = FAIL_LINE.fullmatch(line)
        if m:
            kernel, dtype, check, spec_line, detail = m.groups()
            found[(kernel, dtype, check)] = (int(spec_line), detail)
    return found


def table(path: Path) -> dict[str, dict[str, str]]:
    """The Markdown report as kernel -> {column: cell}, in row order."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header, *rows = [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines
    ]
    return {row[0].strip("`"): dict(zip(header, row, strict=True)) for row in rows}
