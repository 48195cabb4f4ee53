"""Comparisons and the messages a failure prints."""

from __future__ import annotations

import sys

import torch

from .problem import Part, Problem, unravel

_torch_gradcheck = sys.modules["torch.autograd.gradcheck"]


class GradcheckError(_torch_gradcheck.GradcheckError):
    """A derivative disagrees (also caught by `except torch's GradcheckError`)."""


def _format(value) -> str:
    if isinstance(value, complex) or (
        isinstance(value, torch.Tensor) and value.is_complex()
    ):
        value = complex(value)
        return f"{value.real:.8g}{value.imag:+.8g}j"
    return f"{float(value):.8g}"


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
    lines = [
        (
            f"Jacobian mismatch for {part.describe()} with respect to input {i}, "
            f"{mode} mode, in {problem.name}"
        ),
        (
            f"  worst element: input {i}{list(unravel(x.shape, j))} -> "
            f"{part.describe()}{list(unravel(output_shape, m))}"
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
    return "\n".join(
        [
            (
                f"Fast gradcheck mismatch for {part.describe()} with respect to input "
                f"{i}, {mode} mode, in {problem.name}"
            ),
            "  the scalar v^T J u (random u, v):",
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
