"""Hypothesis strategies for programs.

A program is written one line at a time, each line drawn from the vocabularies
(`vocab_*.py`, drawn by `Weights`) for the variables as they are so far; a
recipe (a vocabulary function that is a generator) writes a few lines, each
drawn once the ones before it ran. To know them, the builder runs
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

import inspect
import warnings
from dataclasses import dataclass, fields

import torch
import torch.autograd.forward_ad as native_fwAD
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .interpret import PlainEngine, compiled
from .literals import COMPLEX, DTYPES, SHAPES, tensor_code
from .program import NestedInput, NestedProgram, Program, rename_operands, step_info
from .state import DrawFn, GenState, Var
from .vocab_complex_writes import COMPLEX_WRITES
from .vocab_compute import COMPUTE
from .vocab_duals import DUALS, leaf, plain_buffer
from .vocab_inplace import INPLACE
from .vocab_linalg import LINALG
from .vocab_masks import MASKS
from .vocab_mixed import mixed_leaf
from .vocab_view_inplace import VIEW_INPLACE, odd_leaf
from .vocab_views import VIEWS

MAX_STEPS = 14
MAX_LEAVES = 3
# Values and tangents beyond this are dropped: finite differences of exp(exp(x))
# say more about rounding than about derivatives.
MAGNITUDE_LIMIT = 1e3


@dataclass(frozen=True)
class Weights:
    """How often each vocabulary is drawn for a step, and each kind of leaf or of
    nested inputs (0: never). In-place steps weigh most: they are where forward AD
    has the most to get right. The last eight are shapes another fuzzer found
    dualgen wrong on; `run.py --weight NAME=N` sets any of them."""

    compute: int = 2
    views: int = 2
    inplace: int = 4
    duals: int = 2  # flat only: nested bodies get plain buffers instead
    complex_writes: int = 2  # real/complex values into views of complex tensors
    masks: int = 1  # relu, where, clamp, maximum..., away from their kinks
    view_inplace: int = 1  # unsqueeze_, t_, as_strided_ ... of expanded/empty duals
    linalg: int = 1  # normalizations, det, slogdet, solve, inv
    # Leaves of flat programs, against 3 for the plain `leaf`:
    mixed_leaf: int = 1  # a tangent of another precision than its primal's
    odd_leaf: int = 1  # an empty (stepped slice) or expanded dual
    # Nested programs' inputs, against 2 for inputs of one drawn dtype each:
    complex_real_inputs: int = 1  # a complex128 input and a float64 one
    # Each nested input, against 3 for dual at both levels, for each level:
    one_level_inputs: int = 1  # dual at the outer level only, or the inner only

    @classmethod
    def parse(cls, items: list[str]) -> Weights:
        """Weights from `NAME=N` items, the rest as default."""
        names = {f.name for f in fields(cls)}
        given = {}
        for item in items:
            name, _, value = item.partition("=")
            if name not in names:
                raise ValueError(f"unknown weight {name!r} (one of {sorted(names)})")
            given[name] = int(value)
        return cls(**given)


DEFAULT_WEIGHTS = Weights()


def weighted(*pairs) -> tuple:
    """Each item repeated its weight's times, for `st.sampled_from` (which shrinks
    towards the first: the original vocabularies come first)."""
    return tuple(item for item, w in pairs for _ in range(w))


def flat_groups(w: Weights) -> tuple:
    return weighted(
        (COMPUTE, w.compute),
        (VIEWS, w.views),
        (INPLACE, w.inplace),
        (DUALS, w.duals),
        (COMPLEX_WRITES, w.complex_writes),
        (MASKS, w.masks),
        (VIEW_INPLACE, w.view_inplace),
        (LINALG, w.linalg),
    )


def nested_groups(w: Weights) -> tuple:
    """Nested bodies are functions of their inputs for torch.func.jvp: no fwAD
    calls, and plain buffers the only new tensors that are not computed."""
    return weighted(
        (COMPUTE, w.compute),
        (VIEWS, w.views),
        (INPLACE, w.inplace),
        ((plain_buffer,), w.duals),
        (COMPLEX_WRITES, w.complex_writes),
        (MASKS, w.masks),
        (VIEW_INPLACE, w.view_inplace),
        (LINALG, w.linalg),
    )


def leaf_kinds(w: Weights) -> tuple:
    return weighted((leaf, 3), (mixed_leaf, w.mixed_leaf), (odd_leaf, w.odd_leaf))


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

    def step(self, make) -> int:
        """One step of vocabulary function `make`: a line, or a recipe (a
        generator) of lines, each drawn once the ones before it ran (it is sent
        whether its last line was kept, and ends when it gives up). How many
        lines it tried (at least one)."""
        made = make(self.draw, self.state)
        if not inspect.isgenerator(made):
            self.try_line(made)
            return 1
        tried = 0
        try:
            line = next(made)
            while True:
                tried += 1
                line = made.send(self.try_line(line))
        except StopIteration:
            return max(tried, 1)

    def write(self, groups, lines: int) -> None:
        """About `lines` more lines (a recipe's all count), each step from a
        vocabulary drawn from `groups`."""
        while lines > 0:
            group = self.draw(st.sampled_from(groups))
            lines -= self.step(self.draw(st.sampled_from(group)))


@st.composite
def programs(
    draw, max_steps: int = MAX_STEPS, weights: Weights = DEFAULT_WEIGHTS
) -> Program:
    """A straight-line program: a few leaves (dual or plain literals), then steps."""
    with native_fwAD.dual_level():
        builder = Builder(draw)
        kinds = leaf_kinds(weights)
        for _ in range(draw(st.integers(1, MAX_LEAVES))):
            builder.step(draw(st.sampled_from(kinds)))
        if not builder.state.vars:  # a leaf native refuses (a tangent it rejects)
            builder.try_line(leaf(draw, builder.state, dual=True))
        if builder.state.vars:
            builder.write(flat_groups(weights), draw(st.integers(1, max_steps)))
        return Program(tuple(builder.lines), frozenset(builder.state.kinds))


@st.composite
def nested_inputs(
    draw, name: str, dtype: torch.dtype | None = None, levels: str = "both"
) -> NestedInput:
    """An input: a literal primal and its outer and inner tangents, all of one dtype
    (`dtype`, drawn when None), layout and conjugate bit (so each level keeps the
    tangent as given); `levels` "outer" or "inner": dual at that level only."""
    shape = draw(st.sampled_from(SHAPES))
    if dtype is None:
        dtype = draw(st.sampled_from(DTYPES))
    primal = draw(tensor_code(shape, dtype))
    layout, dim, conj = primal.layout, primal.expand_dim, primal.conj
    outer = draw(tensor_code(shape, dtype, layout, dim, conj))
    inner = draw(tensor_code(shape, dtype, layout, dim, conj))
    outer = "None" if levels == "inner" else str(outer)
    inner = "None" if levels == "outer" else str(inner)
    return NestedInput(name, str(primal), outer, inner)


# Nested inputs' dtypes: each drawn, or a complex and a real one (real values
# written into complex memory at both levels).
COMPLEX_AND_REAL = (COMPLEX[0], torch.float64)
COMPLEX_REAL_INPUTS = "complex and real inputs"
# Each input dual at both levels, or at one of them only (a tensor computed from
# it has entries at that level alone, its views too).
LEVELS = ("both", "outer", "inner")
ONE_LEVEL_INPUT = "input dual at one level"


@st.composite
def nested_programs(
    draw, max_steps: int = MAX_STEPS, weights: Weights = DEFAULT_WEIGHTS
) -> NestedProgram:
    """A function of one or two inputs, for second-order tangents."""
    inputs = []
    with native_fwAD.dual_level():
        builder = Builder(draw, nested=True)
        pairs = weighted((False, 2), (True, weights.complex_real_inputs))
        if draw(st.sampled_from(pairs)):
            dtypes = COMPLEX_AND_REAL
            builder.state.mark(COMPLEX_REAL_INPUTS)
        else:
            dtypes = (None,) * draw(st.integers(1, 2))
        one = weights.one_level_inputs
        for k, dtype in enumerate(dtypes):
            levels = draw(st.sampled_from(LEVELS[:1] * 3 + LEVELS[1:] * one))
            i = draw(nested_inputs(f"x{k}", dtype, levels))
            if levels != "both":
                builder.state.mark(ONE_LEVEL_INPUT)
            # Native (one level) is given whichever tangent there is: the
            # builder's choices only need to know the input has one.
            tangent = i.outer if i.inner == "None" else i.inner
            builder.add_input(
                i.name, f"{i.name} = fwAD.make_dual({i.primal}, {tangent})"
            )
            inputs.append(i)
        builder.write(nested_groups(weights), draw(st.integers(1, max_steps)))
        kinds = frozenset(builder.state.kinds)
        return NestedProgram(tuple(inputs), tuple(builder.lines), kinds)


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
