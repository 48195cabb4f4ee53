"""What gradcheck differentiates: a function, its inputs, its real output parts.

The gradcheck note reduces every case to real-valued functions: a complex output is
checked as two functions, its real part and its imaginary part. A `Part` is one of
them. Every Jacobian below is indexed by (differentiable input, part) and holds, at
[input element j, part element m], d part_m / d a_j + i d part_m / d b_j for an input
element a_j + i b_j (the `2 * CW` convention; just d part_m / d x_j for real input).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import forward_ad as fwAD
from .. import torch_support
from .tape import Tape, is_differentiable

# Native's words for an mkldnn input to forward-mode gradcheck (torch 2.14 fixed
# their grammar), so tests matching native's message match dualgen's.
_NOT_SUPPORTED = (
    "not supported"
    if torch_support.release(torch.__version__) >= (2, 14)
    else "not support"
)


def unravel(shape, flat: int) -> tuple[int, ...]:
    """The index of element `flat` (row-major) of a tensor of `shape`."""
    index = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        index.append(r)
    return tuple(reversed(index))


@dataclass(frozen=True)
class Part:
    output: int  # index among the function's outputs
    imag: bool | None  # None: a real output; else which part of a complex one
    numel: int

    def of(self, t: torch.Tensor) -> torch.Tensor:
        """This part of the output `t` (or of its tangent), flattened."""
        if self.imag is None:
            return t.reshape(-1)
        return (t.imag if self.imag else t.real).reshape(-1)

    @property
    def cotangent_unit(self):
        # Backward with grad_out 1 differentiates the real part, 1j the imaginary.
        return 1j if self.imag else 1


@dataclass(frozen=True)
class Problem:
    func: Callable
    name: str
    values: tuple  # the inputs, differentiable ones as detached copies
    inputs: tuple[int, ...]  # positions of the differentiable inputs
    parts: tuple[Part, ...]

    @staticmethod
    def make(
        func: Callable,
        inputs,
        *,
        masked,
        finite_differences: bool = False,
        forward: bool = False,
    ) -> Problem:
        """The problem of differentiating `func` at `inputs`, after native
        gradcheck's checks on them. `finite_differences`: gradcheck will perturb the
        inputs in place, so a differentiable input must not have a zero stride.
        `forward`: forward mode will be checked."""
        raw = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
        diff = []
        for i, x in enumerate(raw):
            if not (isinstance(x, torch.Tensor) and x.requires_grad):
                continue
            if x.dtype not in (torch.float64, torch.complex128):
                warnings.warn(
                    f"Input #{i} requires gradient and is not a double precision "
                    "floating point or complex. This check will likely fail if all "
                    "the inputs are not of double precision floating point or complex.",
                    stacklevel=3,
                )
            if finite_differences and x.layout == torch.strided:
                _check_no_zero_stride(i, x)
            if is_differentiable(x):
                diff.append(i)
        diff = tuple(diff)
        if not diff:
            raise ValueError(
                "gradcheck expects at least one input tensor to require gradient, "
                "but none of them have requires_grad=True."
            )
        for i, x in enumerate(raw):
            if isinstance(x, torch.Tensor) and x.layout != torch.strided:
                if forward and x.layout == torch._mkldnn and x.requires_grad:
                    # Native's error, for the same case (native checks mkldnn
                    # inputs in backward mode, dualgen in neither).
                    raise ValueError(
                        f"MKLDNN inputs are {_NOT_SUPPORTED} for forward AD gradcheck. "
                        f"(dualgen.gradcheck checks strided tensors only; input {i} "
                        f"is {x.layout})"
                    )
                raise NotImplementedError(
                    f"dualgen.gradcheck checks strided tensors only, not {x.layout}"
                    + (" (masked semantics)" if masked else "")
                )
        values = tuple(
            x.detach().clone() if isinstance(x, torch.Tensor) else x for x in raw
        )
        name = getattr(func, "__name__", None) or repr(func)
        problem = Problem(func, name, values, diff, ())
        outputs = problem.evaluate(values)
        parts = []
        for k, o in enumerate(outputs):
            if not is_differentiable(o):
                continue
            if o.is_complex():
                parts += [Part(k, False, o.numel()), Part(k, True, o.numel())]
            else:
                parts.append(Part(k, None, o.numel()))
        return Problem(func, name, values, diff, tuple(parts))

    def evaluate(self, values) -> tuple:
        """The function's outputs, flattened (a Tensor[] output is its tensors)."""
        return tuple(_flatten(self.func(*values)))

    def sample(self) -> tuple:
        """The outputs at the current input values, as copies: an output may be a
        view of an input that the finite differences perturb next."""
        return tuple(
            o.clone() if isinstance(o, torch.Tensor) else o
            for o in self.evaluate(self.values)
        )

    def input(self, i: int) -> torch.Tensor:
        return self.values[i]

    # Messages number inputs and outputs as torch.autograd.gradcheck does, counting
    # the differentiable ones only, so that tests matching torch's messages match.

    def input_number(self, i: int) -> int:
        """The input at position `i`, numbered among the differentiable inputs."""
        return self.inputs.index(i)

    def output_number(self, output: int) -> int:
        """Output `output` (of the flattened outputs), numbered among the
        differentiable ones."""
        return sorted({p.output for p in self.parts}).index(output)

    def output_name(self, part: Part) -> str:
        """'output 0', or 'output 0 (real part)' for a part of a complex output."""
        name = f"output {self.output_number(part.output)}"
        if part.imag is None:
            return name
        return f"{name} ({'imaginary' if part.imag else 'real'} part)"

    def numbering_note(self) -> str | None:
        """Where torch's numbering differs from the positions: which argument and
        which output each number stands for; None where it does not."""
        outputs = sorted({p.output for p in self.parts})
        moved = [
            f"input {n} is argument {i}" for n, i in enumerate(self.inputs) if n != i
        ]
        moved += [
            f"output {n} is returned value {k}" for n, k in enumerate(outputs) if n != k
        ]
        if not moved:
            return None
        return (
            "(Numbered as torch.autograd.gradcheck numbers them, counting "
            f"differentiable inputs and outputs only: in {self.name}, "
            + ", ".join(moved)
            + ".)"
        )

    def jvp(self, tangents: dict[int, torch.Tensor]) -> tuple:
        """Output tangents (zeros where none) for tangents on some inputs."""
        with fwAD.dual_level():
            return self._jvp_within_level(tangents)

    def jvps(self, tangent_sets, *, absent_as_zeros: bool = True):
        """`jvp` for each tangent set, all within one dual level (cheaper).
        `absent_as_zeros=False`: None for an output without a tangent."""
        with fwAD.dual_level():
            for tangents in tangent_sets:
                yield self._jvp_within_level(tangents, absent_as_zeros)

    def _jvp_within_level(
        self, tangents: dict[int, torch.Tensor], absent_as_zeros: bool = True
    ) -> tuple:
        values = list(self.values)
        for i, t in tangents.items():
            values[i] = fwAD.make_dual(values[i], t)
        result = []
        for o in self.evaluate(values):
            if not is_differentiable(o):
                result.append(None)
                continue
            primal, tangent = fwAD.unpack_dual(o)
            if tangent is None and absent_as_zeros:
                tangent = torch.zeros_like(primal)
            result.append(tangent)
        return tuple(result)

    def recorded(self, *, check_grad_dtypes: bool = False) -> Recording:
        """Run once on a tape, to be differentiated backwards any number of times
        (kept: every backward check of this problem reuses it)."""
        cache = self.__dict__.setdefault("_recordings", {})
        if check_grad_dtypes not in cache:
            cache[check_grad_dtypes] = self._record(check_grad_dtypes)
        return cache[check_grad_dtypes]

    def _record(self, check_grad_dtypes: bool) -> Recording:
        values = list(self.values)
        for i in self.inputs:
            # A fresh tensor per run: the function may write into its inputs.
            values[i] = values[i].clone()
        with Tape(check_grad_dtypes=check_grad_dtypes) as tape:
            tape.watch(*(values[i] for i in self.inputs))
            outputs = self.evaluate(values)
        return Recording(self, tape, tuple(values[i] for i in self.inputs), outputs)


@dataclass(frozen=True)
class Recording:
    problem: Problem
    tape: Tape
    watched: tuple
    outputs: tuple

    def vjp(
        self, part: Part, cotangent: torch.Tensor, *, undefined: bool = False
    ) -> list[torch.Tensor]:
        """Gradients of every differentiable input for `cotangent` (real, shaped like
        the output) on `part`; zeros where an input does not reach the output.
        `undefined`: a zero cotangent stands for an undefined gradient."""
        output = self.outputs[part.output]
        grads = self.tape.grad(
            output,
            self.watched,
            cotangent * part.cotangent_unit,
            undefined=undefined,
        )
        return [
            torch.zeros_like(x) if g is None else g for g, x in zip(grads, self.watched)
        ]


def _check_no_zero_stride(i: int, x: torch.Tensor) -> None:
    """Native's rule: perturbing one element of an input whose elements overlap
    (a dimension of size > 1 with stride 0, as `expand` makes) perturbs several."""
    if any(stride <= 0 and size > 1 for stride, size in zip(x.stride(), x.shape)):
        raise RuntimeError(
            f"The {i}th input has a dimension with stride 0. gradcheck only supports "
            "inputs that are non-overlapping to be able to compute the numerical "
            "gradients correctly. You should call .contiguous on the input before "
            "passing it to gradcheck."
        )


def check_perturbed_outputs(minus, plus, eps: float, index=None) -> None:
    """Native's check that `func` returns outputs of the same shapes and dtypes at
    the two points of a central difference (`index`: the element perturbed, in
    slow mode). An AssertionError, as in torch."""
    on_index = f"on index {index} " if index is not None else ""
    for a, b in zip(minus, plus):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            continue
        for what, first, second in (
            ("shape", a.shape, b.shape),
            ("dtype", a.dtype, b.dtype),
        ):
            if first != second:
                raise AssertionError(
                    f"Expected `func` to return outputs with the same {what} when "
                    f"inputs are perturbed {on_index}by {eps}, but got: {what}s "
                    f"{first} and {second}."
                )


def _flatten(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def random_like(x: torch.Tensor, generator, real: bool = True) -> torch.Tensor:
    """A non-negative random vector of unit norm with x's numel, as the note's u, v."""
    dtype = x.real.dtype if (real and x.is_complex()) else x.dtype
    v = torch.rand(x.numel(), generator=generator, dtype=torch.float64).to(dtype)
    norm = v.norm()
    return v / norm if norm > 0 else v
