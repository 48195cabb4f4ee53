"""Comparisons and the messages a failure prints."""

from __future__ import annotations

import sys

import torch

from .problem import Part, Problem, unravel

_torch_gradcheck = sys.modules["torch.autograd.gradcheck"]


class GradcheckError(_torch_gradcheck.GradcheckError):
    """A derivative disagrees (also caught by `except torch's GradcheckError`)."""


# torch.autograd.gradcheck's words for the failures both report, verbatim (its
# missing space after "gradient." included), so that tests matching them match
# dualgen's messages too; dualgen's detail follows them.
NOT_REENTRANT = (
    "Backward is not reentrant, i.e., running backward with same input and "
    "grad_output multiple times gives different values, although analytical "
    "gradient matches numerical gradient.The tolerance for nondeterminism was "
    "{nondet_tol}."
)
FAST_FAILED_SLOW_PASSES = (
    "Fast gradcheck failed but element-wise differences are small. This means "
    "that the\ntest might've passed in slow_mode!"
)
NOT_MULTIPLIED_BY_GRAD_OUTPUT = "backward not multiplied by grad_output"
_UNDEFINED_NOTE = (
    'Please look at "Notes about undefined output gradients" in '
    '"tools/autograd/derivatives.yaml"'
)
UNDEFINED_GRAD_RAISES = (
    f"Expected backward function to handle undefined output grads. {_UNDEFINED_NOTE}"
)
UNDEFINED_GRAD_NONZERO = (
    "Expected all input grads to be undefined or zero when all output grads are "
    f"undefined or zero. {_UNDEFINED_NOTE}"
)
UNDEFINED_TANGENT_MISMATCH = (
    "Mismatch in tangent values for output with index: {output} when input: "
    "{input} has an undefined tangent value."
)


def _format(value) -> str:
    if isinstance(value, complex) or (
        isinstance(value, torch.Tensor) and value.is_complex()
    ):
        value = complex(value)
        return f"{value.real:.8g}{value.imag:+.8g}j"
    return f"{float(value):.8g}"


def headline(
    problem: Problem, key: tuple[int, Part], mode: str, input_part: str | None = None
) -> str:
    """The first line of a Jacobian mismatch: torch's words first (its prefix for a
    complex part, its numbering), so that a test matching torch's message matches
    this one, then dualgen's: the mode and the function. `input_part`: in forward
    mode on a complex input, which of torch's two checks fails ('real' or
    'imaginary' part of the input); backward mode names the output's part."""
    i, part = key
    prefix = ""
    if mode == "backward" and part.imag is not None:
        which = "imaginary" if part.imag else "real"
        prefix = f"While considering the {which} part of complex outputs only, "
    elif mode == "forward" and input_part is not None:
        prefix = f"While considering the {input_part} part of complex inputs only, "
    jacobian = (
        "Jacobian computed with forward mode" if mode == "forward" else "Jacobian"
    )
    return (
        f"{prefix}{jacobian} mismatch for output {problem.output_number(part.output)} "
        f"with respect to input {problem.input_number(i)}, {mode} mode, in "
        f"{problem.name}"
    )


def failing_input_part(
    problem: Problem, i: int, mode: str, analytical, numerical, atol: float, rtol: float
) -> str | None:
    """Forward mode on a complex input: torch checks d/db (the imaginary part of the
    input: here the imaginary component of each entry) before d/da, and names the
    first that fails. None for a real input or backward mode."""
    if mode != "forward" or not problem.input(i).is_complex():
        return None
    a = torch.as_tensor(analytical, dtype=torch.complex128)
    n = torch.as_tensor(numerical, dtype=torch.complex128)
    close = (a.imag - n.imag).abs() <= atol + rtol * n.imag.abs()
    return "real" if bool(close.all()) else "imaginary"


def matrix_mismatch(
    problem: Problem,
    key: tuple[int, Part],
    numerical: torch.Tensor,
    analytical: torch.Tensor,
    atol: float,
    rtol: float,
    mode: str,
) -> str | None:
    """None if the matrices agree within atol + rtol * |numerical|; else a message
    naming the worst element."""
    if numerical.numel() == 0:
        return None
    excess = (analytical - numerical).abs() - (atol + rtol * numerical.abs())
    worst = int(excess.reshape(-1).argmax())
    if excess.reshape(-1)[worst] <= 0 and not excess.isnan().any():
        return None
    if excess.isnan().any():
        worst = int(excess.isnan().reshape(-1).nonzero()[0])
    i, part = key
    j, m = divmod(worst, numerical.shape[1])
    x = problem.input(i)
    output_shape = problem.evaluate(problem.values)[part.output].shape
    n, a = numerical.reshape(-1)[worst], analytical.reshape(-1)[worst]
    input_part = failing_input_part(problem, i, mode, analytical, numerical, atol, rtol)
    lines = [
        headline(problem, key, mode, input_part),
        (
            f"  worst element: input {problem.input_number(i)}"
            f"{list(unravel(x.shape, j))} -> "
            f"{problem.output_name(part)}{list(unravel(output_shape, m))}"
        ),
        f"  numerical:  {_format(n)}",
        f"  analytical: {_format(a)}",
        (
            f"  |analytical - numerical| = {abs(complex(a - n)):.3g} > "
            f"atol + rtol * |numerical| = {atol + rtol * abs(complex(n)):.3g}"
        ),
    ]
    if numerical.numel() <= 64:
        lines += [
            "  numerical Jacobian (rows: input elements):",
            _indent(str(numerical)),
            "  analytical Jacobian:",
            _indent(str(analytical)),
        ]
    return "\n".join(lines)


def scalar_mismatch(
    problem: Problem,
    key: tuple[int, Part],
    numerical: complex,
    analytical: complex,
    atol: float,
    rtol: float,
    mode: str,
) -> str | None:
    tolerance = atol + rtol * abs(numerical)
    difference = abs(analytical - numerical)
    if difference <= tolerance:
        return None
    i, part = key
    input_part = failing_input_part(problem, i, mode, analytical, numerical, atol, rtol)
    return "\n".join(
        [
            headline(problem, key, mode, input_part),
            f"  fast mode, the scalar v^T J u (random u, v) for {problem.output_name(part)}:",
            f"  numerical:  {_format(numerical)}",
            f"  analytical: {_format(analytical)}",
            (
                f"  |analytical - numerical| = {difference:.3g} > "
                f"adjusted atol + rtol * |numerical| = {tolerance:.3g}"
            ),
        ]
    )


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
