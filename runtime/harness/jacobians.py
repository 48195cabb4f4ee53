"""Full Jacobians, three ways: central differences, forward mode column by column
(one JVP per input element, two for a complex one), backward mode row by row (one
VJP per output element). Keys are (input position, Part); values are matrices of
shape (input numel, part numel), as described in problem.py."""

from __future__ import annotations

import torch

from .problem import Part, Problem, check_perturbed_outputs, unravel

Jacobians = dict[tuple[int, Part], torch.Tensor]


def _empty(problem: Problem) -> Jacobians:
    jacobians = {}
    for i in problem.inputs:
        x = problem.input(i)
        for part in problem.parts:
            jacobians[(i, part)] = torch.zeros(
                x.numel(), part.numel, dtype=x.dtype, device=x.device
            )
    return jacobians


def _directions(x: torch.Tensor):
    """Perturbation directions of one element and where they land: the real axis,
    and for a complex input the imaginary axis (the `i d/db` half of 2 * CW)."""
    return ((1, 1), (1j, 1j)) if x.is_complex() else ((1, 1),)


def _element(x: torch.Tensor, j: int) -> torch.Tensor:
    """A 0-d view of x's element j in row-major order (x need not be contiguous)."""
    return x[unravel(x.shape, j)]


def numerical(problem: Problem, eps: float) -> Jacobians:
    jacobians = _empty(problem)
    for i in problem.inputs:
        x = problem.input(i)
        for j in range(x.numel()):
            entry = _element(x, j)
            original = entry.clone()
            for step, weight in _directions(x):
                entry.copy_(original + eps * step)
                plus = problem.sample()
                entry.copy_(original - eps * step)
                minus = problem.sample()
                entry.copy_(original)
                check_perturbed_outputs(minus, plus, eps, unravel(x.shape, j))
                for part in problem.parts:
                    k = part.output
                    column = (part.of(plus[k]) - part.of(minus[k])) / (2 * eps)
                    jacobians[(i, part)][j] += weight * column
    return jacobians


def forward(problem: Problem) -> Jacobians:
    # columns[(i, part)][d]: the JVP columns of direction d (real, then imaginary
    # axis for complex input), stacked into the matrix at the end.
    columns = {
        (i, part): [[] for _ in _directions(problem.input(i))]
        for i in problem.inputs
        for part in problem.parts
    }
    # The unit tangents, made before the dual level (there every op pays for the
    # mode): (input, direction, tangents) per JVP.
    units = []
    for i in problem.inputs:
        x = problem.input(i)
        for j in range(x.numel()):
            for d, (step, _) in enumerate(_directions(x)):
                # A tensor of its own laid out like x, as native's (a view's
                # `_base` shows in custom Functions' jvp checks).
                tangent = torch.zeros_like(x, requires_grad=False)
                tangent[unravel(x.shape, j)] = step
                units.append((i, d, {i: tangent}))
    results = problem.jvps(tangents for _, _, tangents in units)
    for (i, d, _), tangents in zip(units, results):
        for part in problem.parts:
            columns[(i, part)][d].append(part.of(tangents[part.output]))
    jacobians = _empty(problem)
    for (i, part), by_direction in columns.items():
        for (_, weight), cols in zip(_directions(problem.input(i)), by_direction):
            if cols:
                stacked = torch.stack(cols)
                jacobians[(i, part)] += stacked if weight == 1 else weight * stacked
    return jacobians


def backward(
    problem: Problem, *, check_grad_dtypes: bool = False, recording=None
) -> Jacobians:
    jacobians = _empty(problem)
    if recording is None:
        recording = problem.recorded(check_grad_dtypes=check_grad_dtypes)
    for part in problem.parts:
        output = recording.outputs[part.output]
        real = output.real if output.is_complex() else output
        # Row m's cotangent is the m-th unit vector, shaped like the output.
        basis = torch.eye(part.numel, dtype=real.dtype).reshape(part.numel, *real.shape)
        for m in range(part.numel):
            grads = recording.vjp(part, basis[m])
            for i, g in zip(problem.inputs, grads):
                jacobians[(i, part)][:, m] = g.reshape(-1)
    return jacobians


def reentrant_difference(
    problem: Problem, first: Jacobians, *, check_grad_dtypes: bool = False, recording
) -> tuple[float, tuple[int, Part] | None]:
    """The largest difference between `first` and the backward Jacobians computed
    again from the same recording (nondeterminism), and where it is."""
    second = backward(problem, check_grad_dtypes=check_grad_dtypes, recording=recording)
    worst, where = 0.0, None
    for key, a in first.items():
        if a.numel():
            d = (a - second[key]).abs().max().item()
            if d > worst:
                worst, where = d, key
    return worst, where
