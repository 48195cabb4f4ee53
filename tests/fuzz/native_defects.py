"""Native forward AD's known defects, by cause.

Each defect names what native does wrong and why, gives a minimal program that
shows it (a test checks that native still gets it wrong and dualgen right), and
recognises the disagreements it causes: the fuzzer's first difference between
native and dualgen, where the line that caused it is known. A disagreement no
defect recognises fails the fuzz test, so a new cause is looked at, not absorbed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .interpret import Trace
from .judge import Finding
from .program import NestedProgram, Program, StepInfo


@dataclass(frozen=True)
class Evidence:
    """A disagreement and what the recognisers may look at."""

    program: Program
    finding: Finding
    native: Trace
    dualgen: Trace

    @property
    def step(self) -> StepInfo:
        return self.program.steps[self.finding.step]

    @property
    def line(self) -> str:
        return self.program.lines[self.finding.step]

    @property
    def aliased(self) -> bool:
        """The line updates a tensor in place reading its memory through another
        operand."""
        return self.native.aliased[self.finding.step]

    def native_state(self):
        return self.native.states[self.finding.step].get(self.finding.variable)

    def dualgen_state(self):
        return self.dualgen.states[self.finding.step].get(self.finding.variable)


@dataclass(frozen=True)
class NativeDefect:
    """A cause. `reproducer`: a program whose judged outcome is this defect, with
    native the culprit by finite differences (both engines alike where `shared`;
    where `dtype_only`, native's tangent is complex for a real value or real for a
    complex one, and dualgen's is not); `variable`: the variable that shows it."""

    name: str
    reproducer: str
    variable: str
    recognises: Callable[[Evidence], bool]
    shared: bool = False  # dualgen follows native here on purpose (see summary)
    dtype_only: bool = False  # only the tangent's dtype: no arbiter but the value's
    # torch.func's, in nested programs (the reproducer is one): whether line k's
    # difference from finite differences in part `index` is this defect's.
    nested: Callable[[NestedProgram, int, int], bool] | None = None

    @property
    def summary(self) -> str:
        """What native does wrong and why: its recogniser's docstring."""
        return " ".join((self.nested or self.recognises).__doc__.split())


def _never(e: Evidence) -> bool:
    return False


_REGISTERED: list[NativeDefect] = []  # in the order `explain` tries them


def _defect(name: str, variable: str, reproducer: str, nested=False, **flags):
    """Registers the decorated function as defect `name`'s recogniser (its docstring
    the summary), or, where `nested`, as its recogniser in nested programs."""

    def register(fn):
        recognises, nested_fn = (_never, fn) if nested else (fn, None)
        _REGISTERED.append(
            NativeDefect(
                name, reproducer, variable, recognises, nested=nested_fn, **flags
            )
        )
        return fn

    return register


@_defect(
    "inplace op reads updated self",
    variable="x0",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor([2.0], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64))
        x0.mul_(x0)
    """,
)
def _inplace_reads_updated_self(e: Evidence) -> bool:
    """An in-place op whose other operand shares memory with self (x.mul_(x),
    x.addcmul_(x, x), v.mul_(x) with v a view of x, x[i] = x[j]): native evaluates the
    tangent formula after the primal update, so the operand it reads is the new value of
    self."""
    return e.aliased and e.finding.aspect == "tangent value"


@_defect(
    "complex written into real memory keeps a complex tangent",
    variable="x1",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor([0.5], dtype=torch.complex128), torch.tensor([(1.0+2.0j)], dtype=torch.complex128))
        x1 = torch.zeros((1,), dtype=torch.float64)
        x1.copy_(x0)
    """,
)
def _complex_tangent_of_real_value(e: Evidence) -> bool:
    """copy_ (or setitem) of a complex dual into a real tensor without a tangent: the
    value keeps the real part, but native gives the real tensor the complex tangent as
    it is (its own formula, `src_t`, is not cast), so the tangent is not the derivative
    of the value."""
    # Where it shows: the written tensor, or one computed from it (an empty one's
    # tangent dtype is not compared, its sum's is).
    if e.finding.variable is None:
        return False
    native, dual = e.native_state(), e.dualgen_state()
    return (
        e.finding.aspect in ("tangent value", "tangent dtype")
        and native.tangent is not None
        and native.tangent.is_complex()
        and not native.value.is_complex()
        and not (dual.tangent is not None and dual.tangent.is_complex())
    )


@_defect(
    "real tangent of a complex primal stays real",
    variable="x0",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor([(0.5+1.0j)], dtype=torch.complex128), torch.tensor([1.0], dtype=torch.float64))
        x0.mul_(torch.tensor([1j], dtype=torch.complex128))
    """,
    shared=True,
)
def _real_tangent_of_complex_value(e: Evidence) -> bool:
    """make_dual of a complex primal with a real tangent keeps the tangent real; an
    in-place op that makes it complex (x.mul_(1j)) writes into it, dropping the
    imaginary part. dualgen stores tangents as native does (a tangent of another dtype
    is kept as given), so it shares this; native also refuses .real, .imag and conj
    views of such a tensor."""
    native = e.native_state()
    return (
        e.finding.culprit == "both"
        and e.finding.aspect == "tangent value"
        and native.value.is_complex()
        and native.tangent is not None
        and not native.tangent.is_complex()
    )


@_defect(
    "complex tensor written with a real tangent keeps it real",
    variable="x1",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor([0.5], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64))
        x1 = torch.zeros((1,), dtype=torch.complex128)
        x1.copy_(x0)
    """,
    dtype_only=True,
)
def _complex_value_with_real_tangent(e: Evidence) -> bool:
    """An in-place write of a real dual into a complex tensor without a tangent: copy_
    gives it the source's real tangent as it is, and an update through its .real view
    hands the view's real tangent to the base when laid out like both (always, for an
    empty tensor). The complex tensor then has a real tangent: its .real and .imag
    raise, and results computed from it have real tangents. dualgen gives it a complex
    one."""
    if e.finding.variable is None:
        return False
    native, dual = e.native_state(), e.dualgen_state()
    return (
        e.finding.aspect == "tangent dtype"
        and native.value.is_complex()
        and not native.tangent.is_complex()
        and dual.tangent.is_complex()
    )


@_defect(
    "0-d add or sub with alpha promotes the tangent to float64",
    variable="x2",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor(0.5, dtype=torch.float32), torch.tensor(1.0, dtype=torch.float32))
        x1 = torch.tensor(2.0, dtype=torch.float32)
        x2 = torch.add(x0, x1, alpha=0.5)
    """,
    dtype_only=True,
)
def _zero_dim_alpha_promotes_the_tangent(e: Evidence) -> bool:
    """torch.add / torch.sub of a 0-d float32 dual and an operand without a tangent,
    with alpha: native scales the operand's zero tangent by alpha as a 0-d float64
    tensor, and 0-d with 0-d promotes, so the float32 value gets a float64 tangent.
    dualgen's has the value's dtype."""
    if e.finding.variable is None or e.finding.aspect != "tangent dtype":
        return False
    native, dual = e.native_state(), e.dualgen_state()
    return (
        "alpha=" in e.line
        and native.value.dim() == 0
        and native.tangent is not None
        and native.tangent.dtype != native.value.dtype
        and dual.tangent is not None
        and dual.tangent.dtype == dual.value.dtype
    )


@_defect(
    "a normalization's tangent narrowed to its input tangent's dtype",
    variable="x2",
    reproducer="""
        x0 = fwAD.make_dual(torch.tensor([[0.25, 1.0], [-0.25, 2.0]], dtype=torch.float64), torch.tensor([[0.5, 1.0], [0.0, 2.0]], dtype=torch.float32))
        x1 = fwAD.make_dual(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([1.0, 3.0], dtype=torch.float64))
        x2 = torch.nn.functional.batch_norm(x0, None, None, weight=x1, training=True)
    """,
    dtype_only=True,
)
def _norm_narrowed_to_input_tangent_dtype(e: Evidence) -> bool:
    """batch_norm, group_norm and instance_norm of a float64 input whose tangent is
    float32, with a weight whose tangent is float64: native's tangent is float32,
    narrower than the value and than the weight's tangent (without the weight's
    tangent it is float64, promoted with the statistics). dualgen's promotes:
    float64."""
    if e.finding.variable is None or e.finding.aspect != "tangent dtype":
        return False
    native, dual = e.native_state(), e.dualgen_state()
    return (
        _NORMALIZATION.search(e.line) is not None
        and native.tangent is not None
        and native.tangent.dtype != native.value.dtype
        and dual.tangent is not None
        and dual.tangent.dtype == dual.value.dtype
    )


_NORMALIZATION = re.compile(r"\b(batch_norm|group_norm|instance_norm)\(")


@_defect(
    "a view's later tangent ignores its in-place view ops",
    variable="x1",
    reproducer="""
        x0 = torch.zeros((2,), dtype=torch.complex128)
        x1 = x0.real
        x0.unsqueeze_(0)
        x1.unsqueeze_(0)
        x2 = fwAD.make_dual(torch.tensor((1.0+1.0j), dtype=torch.complex128), torch.tensor((3.0+1.0j), dtype=torch.complex128))
        x0[0, 1] = x2
        x3 = x1 * 2.0
    """,
)
def _view_tangent_ignores_inplace_view_op(e: Evidence) -> bool:
    """A view of a tensor without a tangent (x.real, x.expand(2, 2)), changed in
    place by a view op (unsqueeze_, swapdims_), then the base gets a tangent (a write
    of a dual): native derives the view's tangent with the view's first geometry, so
    it has another shape than the view ([2] for a [1, 2] view), or, where the op
    keeps the shape (swapdims_ of a square view), the base's tangent read in the
    view's first order. Likewise a view laid out like its base that got a tangent
    by a write, the base having none: native gives both one tangent tensor, which
    an in-place view op of the base reshapes under the view. dualgen's follows the
    view's geometry as it is now."""
    if e.finding.variable is None:
        return False
    native, dual = e.native_state(), e.dualgen_state()
    if native.tangent is None or dual.tangent is None:
        return False
    if dual.tangent.shape != dual.value.shape:
        return False
    if native.tangent.shape != native.value.shape:
        return True
    reshaped = re.compile(rf"^\s*{e.finding.variable}\.{_INPLACE_VIEW_OPS}\(")
    return any(
        reshaped.match(line) for line in e.program.lines[: e.finding.step]
    ) and _same_values(native.tangent, dual.tangent)


def _same_values(a, b) -> bool:
    """a and b hold the same values, in any order (complex ones too)."""

    def ordered(t):
        return sorted((complex(z) for z in t.flatten().tolist()), key=_re_im)

    return ordered(a) == ordered(b)


def _re_im(z: complex) -> tuple:
    return z.real, z.imag


# In-place view ops (torch.Tag.inplace_view) the fuzzer's programs use.
_INPLACE_VIEW_OPS = (
    r"(unsqueeze_|squeeze_|transpose_|swapdims_|swapaxes_|t_|as_strided_)"
)


# Ops whose second-order part (u^T H v) torch.func's nested jvp gets wrong: their
# forward formulas read saved statistics (mean, rstd) or factors (LU) computed
# without tangents of their own, so the outer level differentiates them as
# constants.
SECOND_ORDER_BLIND = re.compile(
    r"\b(layer_norm|batch_norm|instance_norm|det|logdet|slogdet|solve|solve_ex"
    r"|tensorsolve)\("
)
U_H_V = 3  # nested.PARTS.index("u^T H v")


@_defect(
    "torch.func's second order of normalizations and det/solve",
    variable="x1",
    reproducer="""
        x0 = input(torch.tensor([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]], dtype=torch.float64), v=torch.tensor([[1.0, 0.5, -0.5], [0.25, 1.0, 2.0]], dtype=torch.float64), u=torch.tensor([[0.25, 2.0, 1.0], [1.5, -1.0, 0.5]], dtype=torch.float64))
        x1 = torch.nn.functional.layer_norm(x0, (3,))
    """,
    nested=True,
)
def _second_order_blind(program: NestedProgram, k: int, index: int) -> bool:
    """Nested torch.func.jvp of layer_norm, batch_norm (training), instance_norm, det,
    logdet, slogdet, solve, solve_ex and tensorsolve: the first-order parts are right,
    u^T H v is not (the formulas' saved mean/rstd or LU factors carry no outer tangent).
    Nested programs with these ops are judged by finite differences. The part shows
    at their line or at any later one computed from it (exp of slogdet's
    logabsdet), so any line up to k counts."""
    return index == U_H_V and any(
        SECOND_ORDER_BLIND.search(line) for line in program.body[: k + 1]
    )


DEFECTS: tuple[NativeDefect, ...] = tuple(_REGISTERED)


def explain(
    program: Program, finding: Finding, native: Trace, dualgen: Trace
) -> NativeDefect | None:
    """The registered defect that accounts for `finding`, if any."""
    if finding.culprit == "dualgen":
        return None
    evidence = Evidence(program, finding, native, dualgen)
    for defect in DEFECTS:
        if defect.recognises(evidence):
            return defect
    return None
