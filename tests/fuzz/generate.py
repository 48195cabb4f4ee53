"""Hypothesis strategies for programs.

A program is written one line at a time, each line drawn from the vocabularies
(`vocab_*.py`) for the variables as they are so far. To know them, the builder runs
every line under native forward AD as it writes it. A line is dropped (and the
program so far replayed: a dropped in-place line may have written before it
failed) if it raises, leaves a variable non-finite or huge, or has no derivative
to check: an in-place line whose result depends on the kernel's loop order (an
operand overlapping the written memory other than element for element, or a
tensor written into memory whose elements alias). Native only informs the
choices (shapes, dtypes, which tensors have tangents); the check runs every
engine afresh from the text.
"""

from __future__ import annotations

import warnings

import torch
import torch.autograd.forward_ad as native_fwAD
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .interpret import PlainEngine, compiled
from .literals import DTYPES, SHAPES, tensor_code
from .program import NestedInput, NestedProgram, Program, rename_operands, step_info
from .state import DrawFn, GenState, Var
from .vocab_compute import COMPUTE
from .vocab_duals import DUALS, leaf, plain_buffer
from .vocab_inplace import INPLACE
from .vocab_views import VIEWS

MAX_STEPS = 14
MAX_LEAVES = 3
# Values and tangents beyond this are dropped: finite differences of exp(exp(x))
# say more about rounding than about derivatives.
MAGNITUDE_LIMIT = 1e3

# In-place steps twice: they are where forward AD has the most to get right.
FLAT_GROUPS = (COMPUTE, VIEWS, INPLACE, INPLACE, DUALS)
# Nested bodies are functions of their inputs for torch.func.jvp: no fwAD calls,
# and plain buffers the only new tensors that are not computed.
NESTED_GROUPS = (COMPUTE, VIEWS, INPLACE, INPLACE, (plain_buffer,))


def _sound(t: torch.Tensor | None) -> bool:
    if t is None or t.numel() == 0 or not (t.is_floating_point() or t.is_complex()):
        return True
    magnitude = t.detach().abs()
    finite = bool(magnitude.isfinite().all())
    return finite and float(magnitude.max()) <= MAGNITUDE_LIMIT


def _run(lines, ns: dict) -> None:
    """Run program lines in `ns`, without the warnings torch gives for them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in lines:
            exec(compiled(line), ns)  # noqa: S102 - our own program text


class Builder:
    """A program being written, its variables as native forward AD computes them.
    `prologue` runs first and is not part of the program (a nested program's
    inputs, made dual at one level for native)."""

    def __init__(self, draw: DrawFn, nested: bool = False, prologue=()) -> None:
        self.draw = draw
        self.state = GenState(nested=nested)
        self.prologue = tuple(prologue)
        self.lines: list[str] = []
        self.inputs: list[str] = []
        self._replay()

    def _replay(self) -> None:
        """Run the prologue and the accepted lines in a fresh namespace."""
        self.ns = {"torch": torch, "fwAD": native_fwAD}
        _run(self.prologue + tuple(self.lines), self.ns)
        for var in self.state.vars:
            var.tensor = self.ns[var.name]

    def add_input(self, name: str, line: str) -> None:
        """A nested program's input (not written by the body)."""
        self.prologue += (line,)
        self._replay()
        self.state.vars.append(Var(name, self.ns[name], input=True))
        self.inputs.append(name)
        self.state.count += 1

    def _shares_input_memory(self, t: torch.Tensor) -> bool:
        memory = t.untyped_storage().data_ptr()
        return any(
            self.ns[name].untyped_storage().data_ptr() == memory for name in self.inputs
        )

    def _reads_before_writing(self, line: str) -> bool:
        """Whether an in-place line gives what it would reading its operands from
        copies taken before it writes. Where an operand shares memory with what
        the line writes, other than element for element (`x.scatter_(0, i, v)`
        with v a view of x), the kernel's loop order decides the result: no
        derivative is defined, so the line is dropped."""
        step = step_info(line)
        if step.mutates is None or not step.reads:
            return True
        outcomes = []
        for text in (line, rename_operands(line, "_")):
            ns = PlainEngine().namespace()
            _run(self.prologue + tuple(self.lines), ns)
            for name in step.reads:
                ns["_" + name] = ns[name].clone()
            _run((text,), ns)
            outcomes.append([ns[v.name].clone() for v in self.state.vars])
        return all(a.equal(b) for a, b in zip(*outcomes))

    def _writes_shared_memory(self, line: str) -> bool:
        """Whether the line writes a tensor operand into memory some of whose
        elements alias (an expanded tensor): unless the operand is the same
        along the aliased elements, which write wins is unspecified, for the
        value and for the tangent alike. Fills of constants are kept."""
        step = step_info(line)
        if not step.target or not step.reads:
            return False
        target = eval(step.target, self.ns)  # our own program text
        return torch._debug_has_internal_overlap(target) == 1

    def try_line(self, line: str | None) -> bool:
        """Run `line`; keep it if it runs, every variable stays sound, and it reads
        what it reads before writing."""
        if line is None:
            return False
        try:
            if self._writes_shared_memory(line):
                return False
            _run((line,), self.ns)
            defined = step_info(line).defines
            names = [v.name for v in self.state.vars] + [defined]
            ok = all(self._sound_var(self.ns[n]) for n in names if n is not None)
            ok = ok and self._reads_before_writing(line)
        except Exception:  # noqa: BLE001 - an invalid line is dropped
            ok = False
        if not ok:
            self._replay()
            return False
        self.lines.append(line)
        if defined is not None:
            t = self.ns[defined]
            input_view = self.state.nested and self._shares_input_memory(t)
            self.state.vars.append(Var(defined, t, input=input_view))
            self.state.count += 1
        return True

    @staticmethod
    def _sound_var(t) -> bool:
        if not isinstance(t, torch.Tensor):
            return False  # every variable is a tensor (a line like `x = y.shape`)
        primal, tangent = native_fwAD.unpack_dual(t)
        return _sound(primal) and _sound(tangent)

    def write(self, groups, steps: int) -> None:
        """Up to `steps` more lines, each from a vocabulary drawn from `groups`."""
        for _ in range(steps):
            group = self.draw(st.sampled_from(groups))
            make = self.draw(st.sampled_from(group))
            self.try_line(make(self.draw, self.state))


@st.composite
def programs(draw, max_steps: int = MAX_STEPS) -> Program:
    """A straight-line program: a few leaves (dual or plain literals), then steps."""
    with native_fwAD.dual_level():
        builder = Builder(draw)
        for _ in range(draw(st.integers(1, MAX_LEAVES))):
            builder.try_line(leaf(draw, builder.state))
        if not builder.state.vars:  # a leaf native refuses (a tangent it rejects)
            builder.try_line(leaf(draw, builder.state, dual=True))
        if builder.state.vars:
            builder.write(FLAT_GROUPS, draw(st.integers(1, max_steps)))
        return Program(tuple(builder.lines))


@st.composite
def nested_inputs(draw, name: str) -> NestedInput:
    """An input: a literal primal and its outer and inner tangents, all of one dtype,
    layout and conjugate bit (so each level keeps the tangent as given)."""
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(DTYPES))
    primal = draw(tensor_code(shape, dtype))
    layout, dim, conj = primal.layout, primal.expand_dim, primal.conj
    outer = draw(tensor_code(shape, dtype, layout, dim, conj))
    inner = draw(tensor_code(shape, dtype, layout, dim, conj))
    return NestedInput(name, str(primal), str(outer), str(inner))


@st.composite
def nested_programs(draw, max_steps: int = MAX_STEPS) -> NestedProgram:
    """A function of one or two inputs, for second-order tangents."""
    inputs = []
    with native_fwAD.dual_level():
        builder = Builder(draw, nested=True)
        for k in range(draw(st.integers(1, 2))):
            i = draw(nested_inputs(f"x{k}"))
            builder.add_input(
                i.name, f"{i.name} = fwAD.make_dual({i.primal}, {i.inner})"
            )
            inputs.append(i)
        builder.write(NESTED_GROUPS, draw(st.integers(1, max_steps)))
        return NestedProgram(tuple(inputs), tuple(builder.lines))


# What every fuzz run shares (the short one in the suite derandomizes it).
FUZZ_PROFILE = settings(
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
