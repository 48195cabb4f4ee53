"""Programs as data: straight-line Python over variables `x0, x1, ...`.

A program is its lines of source, nothing else: the interpreter runs exactly the
text that gets printed, so a shrunk failure is its own reproducer, and a regression
test is a string of code. What the classifier needs to know about a line (which
variable it defines or mutates, which it reads, a label for grouping) is parsed
from the text by `step_info`, for generated programs and hand-written ones alike.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from functools import cached_property

import torch

VAR = re.compile(r"\bx\d+\b")
_ASSIGN = re.compile(r"^(x\d+) = (.*)$")
_HEAD = re.compile(r"^(x\d+)(.*)$")
_OPENS, _CLOSES = "([{", ")]}"
_INPLACE = re.compile(r"^(x\d+)(.*?)\.(\w+_)\((.*)\)$")
_LITERAL_STARTS = ("torch.tensor(", "torch.zeros(")
_INPUT = re.compile(r"^(x\d+) = input\((.*)\)$")
# Least precise first; `\b` keeps torch.float16 apart from torch.bfloat16.
_PRECISIONS = (
    (re.compile(r"\bbfloat16\b"), torch.bfloat16),
    (re.compile(r"\bfloat16\b"), torch.float16),
    (re.compile(r"\b(float32|complex64)\b"), torch.float32),
)


def least_precise(code: str) -> torch.dtype:
    """The least precise floating dtype named in `code` (float64 if none)."""
    for pattern, dtype in _PRECISIONS:
        if pattern.search(code):
            return dtype
    return torch.float64


def _skip_call(text: str, start: int) -> int:
    """The index just past the parenthesis closing the call opened before `start`."""
    depth = 1
    i = start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return i


def _setitem(line: str) -> tuple[str, str, str, str] | None:
    """`x1.conj()[idx] = v` as ("x1", ".conj()", "idx", "v"): the value after the
    first ` = ` outside brackets, the index in the last brackets before it (an
    index may hold brackets itself: `x1[torch.tensor([0, 1])]`)."""
    depth = 0
    for i, ch in enumerate(line):
        depth += (ch in _OPENS) - (ch in _CLOSES)
        if depth == 0 and line.startswith(" = ", i):
            left, value = line[:i], line[i + 3 :]
            break
    else:
        return None
    if not left.endswith("]") or "==" in line:
        return None
    depth = 0
    for j in range(len(left) - 1, -1, -1):
        depth += (left[j] in _CLOSES) - (left[j] in _OPENS)
        if depth == 0:
            break
    m = _HEAD.match(left[:j])
    return None if m is None else (m[1], m[2], left[j + 1 : -1], value)


def normalize(line: str) -> str:
    """A line with variables as `x` and tensor literals as `T`: failures whose lines
    normalize alike are counted as one signature."""
    out, i = [], 0
    while i < len(line):
        for start in _LITERAL_STARTS:
            if line.startswith(start, i):
                i = _skip_call(line, i + len(start))
                out.append("T")
                break
        else:
            out.append(line[i])
            i += 1
    return VAR.sub("x", "".join(out))


@dataclass(frozen=True)
class StepInfo:
    """What one line does, as far as the classifier cares.

    kind: "assign" (defines `defines`), "inplace" (an in-place method on `mutates`
    or on a view of it), "setitem" (`mutates[...] = ...`); `op` is the in-place
    method name (or "setitem"), or "" for assignments; `reads` are the variables
    the line reads besides the mutated one's first mention; `target` is the
    expression written through (`x1.real` in `x1.real.mul_(x2)`, `x0[0]` in
    `x0[0][1:] = x2`), "" for assignments.
    """

    kind: str
    defines: str | None
    mutates: str | None
    op: str
    reads: tuple[str, ...]
    signature: str
    target: str = ""


def step_info(line: str) -> StepInfo:
    """Parse one program line (see StepInfo)."""
    signature = normalize(line)
    m = _ASSIGN.match(line)
    if m:
        return StepInfo("assign", m[1], None, "", tuple(VAR.findall(m[2])), signature)
    m = _setitem(line)
    if m:
        reads = tuple(VAR.findall(" ".join(m[1:])))
        target = m[0] + m[1]
        return StepInfo("setitem", None, m[0], "setitem", reads, signature, target)
    m = _INPLACE.match(line)
    if m:
        reads = tuple(VAR.findall(" ".join((m[2], m[4]))))
        return StepInfo("inplace", None, m[1], m[3], reads, signature, m[1] + m[2])
    raise ValueError(f"not a program line: {line!r}")


def rename_operands(line: str, prefix: str) -> str:
    """`line` with the variables its in-place step reads as operands (not the one
    it writes) renamed `prefix + name`: `x0.mul_(x0)` -> `x0.mul_(_x0)`."""
    m = _setitem(line)
    if m:
        value = VAR.sub(lambda v: prefix + v[0], m[3])
        return f"{m[0]}{m[1]}[{m[2]}] = {value}"
    m = _INPLACE.match(line)
    if m:
        return f"{m[1]}{m[2]}.{m[3]}({VAR.sub(lambda v: prefix + v[0], m[4])})"
    return line


@dataclass(frozen=True)
class Program:
    """Straight-line code run inside one `fwAD.dual_level()`. `kinds`: the
    generator's shapes in it (for tallies and tests, not part of the code)."""

    lines: tuple[str, ...]
    kinds: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_code(cls, code: str) -> Program:
        """A program from source, one step a line (blank lines ignored)."""
        text = textwrap.dedent(code)
        return cls(tuple(line.strip() for line in text.splitlines() if line.strip()))

    @cached_property
    def steps(self) -> tuple[StepInfo, ...]:
        return tuple(step_info(line) for line in self.lines)

    @property
    def precision(self) -> torch.dtype:
        """The least precise floating dtype the program uses anywhere: its
        rounding reaches float64 variables computed from it."""
        return least_precise(str(self))

    def made_dual(self, k: int) -> str | None:
        """The variable line k defines as `fwAD.make_dual(...)` itself, if any."""
        step, line = self.steps[k], self.lines[k]
        call = f"{step.defines} = fwAD.make_dual("
        if step.defines is None or not line.startswith(call):
            return None
        return step.defines if _skip_call(line, len(call)) == len(line) else None

    @cached_property
    def finite_differences_apply(self) -> bool:
        """Whether central differences along the tangents are the right answer for
        every variable. Not where a tensor is cut from its tangent while still
        sharing memory with a dual (`detach`, `unpack_dual(...).primal`, a
        `make_dual` of a variable, whose primal stays a tangent-less alias): there
        native forward AD's semantics is the reference."""
        for line in self.lines:
            if ".detach()" in line or "unpack_dual(" in line:
                return False
            if re.search(r"make_dual\(x\d+", line):
                return False
        return True

    def script(self, api: str = "dualgen.forward_ad", show: tuple[str, ...] = ()):
        """The program as a runnable script under `api`, printing the variables
        in `show` (primal and tangent) at the end."""
        body = [f"    {line}" for line in self.lines]
        body += [f"    print({name!r}, fwAD.unpack_dual({name}))" for name in show]
        return "\n".join(
            ["import torch", f"import {api} as fwAD", "", "with fwAD.dual_level():"]
            + body
        )

    def __str__(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class NestedInput:
    """One input of a nested program: its primal, the outer level's tangent `v` and
    the inner level's tangent `u`, all as source; a tangent "None" where the
    input is dual at the other level only."""

    name: str
    primal: str
    outer: str
    inner: str

    def given(self, tangent: str) -> str:
        """`tangent` as torch.func must have it: zeros for "None"."""
        return f"torch.zeros_like({self.primal})" if tangent == "None" else tangent


@dataclass(frozen=True)
class NestedProgram:
    """A function of its inputs, run under two dualgen levels (outer tangent v,
    inner tangent u) and under nested `torch.func.jvp`."""

    inputs: tuple[NestedInput, ...]
    body: tuple[str, ...]
    kinds: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_code(cls, code: str) -> NestedProgram:
        """A program from its printed form (`str`): input lines
        `x0 = input(<primal>, v=<outer>, u=<inner>)`, then the body."""
        inputs, body = [], []
        for line in Program.from_code(code).lines:
            m = _INPUT.match(line)
            if m is None:
                body.append(line)
                continue
            rest, inner = m[2].rsplit(", u=", 1)
            primal, outer = rest.rsplit(", v=", 1)
            inputs.append(NestedInput(m[1], primal, outer, inner))
        return cls(tuple(inputs), tuple(body))

    @cached_property
    def steps(self) -> tuple[StepInfo, ...]:
        return tuple(step_info(line) for line in self.body)

    @property
    def lines(self) -> tuple[str, ...]:
        return self.body

    def script(self, show: tuple[str, ...] = ()) -> str:
        """Runnable under dualgen: each shown variable prints as value, J v, J u and
        u^T H v, and then as nested torch.func.jvp gives them."""
        names = ", ".join(i.name for i in self.inputs)
        lines = ["import torch", "import dualgen.forward_ad as fwAD", ""]
        lines.append("with fwAD.dual_level():")
        for i in self.inputs:
            dual = (
                i.primal
                if i.outer == "None"
                else f"fwAD.make_dual({i.primal}, {i.outer})"
            )
            lines.append(f"    {i.name} = {dual}")
        lines.append("    with fwAD.dual_level():")
        for i in self.inputs:
            if i.inner != "None":
                lines.append(f"        {i.name} = fwAD.make_dual({i.name}, {i.inner})")
        lines += [f"        {line}" for line in self.body]
        for name in show:
            lines.append(f"        p, ju = fwAD.unpack_dual({name})")
            lines.append("        p, ju = p.clone(), ju if ju is None else ju.clone()")
            lines.append(
                f"    print({name!r}, fwAD.unpack_dual(p), "
                "ju if ju is None else fwAD.unpack_dual(ju))"
            )
        lines += ["", "", f"def f({names}):"]
        lines += [f"    {line}" for line in self.body]
        lines.append(f"    return {', '.join(show) or 'None'}")
        primals = ", ".join(i.primal for i in self.inputs)
        outers = ", ".join(i.given(i.outer) for i in self.inputs)
        inners = ", ".join(i.given(i.inner) for i in self.inputs)
        lines += [
            "",
            "",
            "print(torch.func.jvp(",
            f"    lambda {names}: torch.func.jvp(f, ({names},), ({inners},)),",
            f"    ({primals},),",
            f"    ({outers},),",
            "))",
        ]
        return "\n".join(lines)

    @property
    def precision(self) -> torch.dtype:
        return least_precise(str(self))

    def __str__(self) -> str:
        head = [
            f"{i.name} = input({i.primal}, v={i.outer}, u={i.inner})"
            for i in self.inputs
        ]
        return "\n".join(head + list(self.body))
