"""Full Jacobians, three ways: central differences, forward mode column by column
(one JVP per input element, two for a complex one), backward mode row by row (one
VJP per output element). Keys are (input position, Part); values are matrices of
shape (input numel, part numel), as described in problem.py."""

from __future__ import annotations

import torch

from .problem import Part, Problem

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
    index = []
    for size in reversed(x.shape):
        j, r = divmod(j, size)
        index.append(r)
    return x[tuple(reversed(index))]


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
                for part in problem.parts:
                    k = part.output
                    column = (part.of(plus[k]) - part.of(minus[k])) / (2 * eps)
                    jacobians[(i, part)][j] += weight * column
    return jacobians


def forward(problem: Problem) -> Jacobians:
    jacobians = _empty(problem)
    for i in problem.inputs:
        x = problem.input(i)
        for j in range(x.numel()):
            for step, weight in _directions(x):
                tangent = torch.zeros_like(x)
                _element(tangent, j).fill_(step)
                tangents = problem.jvp({i: tangent})
                for part in problem.parts:
                    column = part.of(tangents[part.output])
                    jacobians[(i, part)][j] += weight * column
    return jacobians


def backward(problem: Problem, *, check_grad_dtypes: bool = False) -> Jacobians:
    jacobians = _empty(problem)
    recording = problem.recorded(check_grad_dtypes=check_grad_dtypes)
    for part in problem.parts:
        output = recording.outputs[part.output]
        real = output.real if output.is_complex() else output
        for m in range(part.numel):
            cotangent = torch.zeros_like(real)
            _element(cotangent, m).fill_(1)
            grads = recording.vjp(part, cotangent)
            for i, g in zip(problem.inputs, grads):
                jacobians[(i, part)][:, m] = g.reshape(-1)
    return jacobians


def reentrant_difference(
    problem: Problem, first: Jacobians, *, check_grad_dtypes: bool = False
) -> tuple[float, tuple[int, Part] | None]:
    """The largest difference between `first` and the backward Jacobians computed
    again (nondeterminism), and where it is."""
    second = backward(problem, check_grad_dtypes=check_grad_dtypes)
    worst, where = 0.0, None
    for key, a in first.items():
        if a.numel():
            d = (a - second[key]).abs().max().item()
            if d > worst:
                worst, where = d, key
    return worst, where
