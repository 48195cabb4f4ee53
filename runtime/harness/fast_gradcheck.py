"""Fast mode: one scalar per (input, part) instead of a matrix.

For real input the scalar is v^T J u; for complex input the note's
s = 2 v^T (real(CW) ur + i imag(CW) ui) = v^T (dy/da ur) + i v^T (dy/db ui).
Numerically: two evaluations per direction. Forward mode: one JVP per direction.
Backward mode: one VJP per part, s = real(g) . ur + i imag(g) . ui.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .problem import Part, Problem, check_perturbed_outputs, random_like

Scalars = dict[tuple[int, Part], complex]


@dataclass(frozen=True)
class Probes:
    """The random vectors: ur (and ui for complex) per input, v per part."""

    ur: dict[int, torch.Tensor]
    ui: dict[int, torch.Tensor]
    v: dict[Part, torch.Tensor]

    @staticmethod
    def draw(problem: Problem, seed: int = 0) -> Probes:
        generator = torch.Generator().manual_seed(seed)
        ur, ui, v = {}, {}, {}
        for i in problem.inputs:
            x = problem.input(i)
            ur[i] = random_like(x, generator).reshape(x.shape)
            if x.is_complex():
                ui[i] = random_like(x, generator).reshape(x.shape)
        for part in problem.parts:
            output = problem.evaluate(problem.values)[part.output]
            real = output.real if output.is_complex() else output
            v[part] = random_like(real, generator)
        return Probes(ur, ui, v)

    def adjusted_atol(self, atol: float, i: int, part: Part) -> float:
        """atol scaled by v^T M u (M all ones): the bound on v^T E u for |E| <= atol."""
        sum_u = self.ur[i].sum().item() + (
            self.ui[i].sum().item() if i in self.ui else 0.0
        )
        return atol * sum_u * self.v[part].sum().item()

    def directions(self, i: int):
        """(tangent, weight) pairs: the real direction ur, and for a complex input
        the imaginary direction i * ui, whose contribution lands in the imaginary
        part of s."""
        yield self.ur[i].to(self.ur[i].dtype), 1
        if i in self.ui:
            yield self.ui[i] * 1j, 1j


def _dot(v: torch.Tensor, column: torch.Tensor) -> float:
    return torch.dot(v.reshape(-1), column.reshape(-1)).item()


def numerical(problem: Problem, probes: Probes, eps: float) -> Scalars:
    scalars = {}
    for i in problem.inputs:
        x = problem.input(i)
        original = x.clone()
        for tangent, weight in probes.directions(i):
            x.copy_(original + eps * tangent)
            plus = problem.sample()
            x.copy_(original - eps * tangent)
            minus = problem.sample()
            x.copy_(original)
            check_perturbed_outputs(minus, plus, eps)
            for part in problem.parts:
                k = part.output
                column = (part.of(plus[k]) - part.of(minus[k])) / (2 * eps)
                value = weight * _dot(probes.v[part], column)
                scalars[(i, part)] = scalars.get((i, part), 0) + value
    return scalars


def forward(problem: Problem, probes: Probes) -> Scalars:
    scalars = {}
    for i in problem.inputs:
        for tangent, weight in probes.directions(i):
            tangents = problem.jvp({i: tangent.to(problem.input(i).dtype)})
            for part in problem.parts:
                column = part.of(tangents[part.output])
                value = weight * _dot(probes.v[part], column)
                scalars[(i, part)] = scalars.get((i, part), 0) + value
    return scalars


def backward(problem: Problem, probes: Probes, *, check_grad_dtypes=False) -> Scalars:
    scalars = {}
    recording = problem.recorded(check_grad_dtypes=check_grad_dtypes)
    for part in problem.parts:
        output = recording.outputs[part.output]
        shape = output.shape
        grads = recording.vjp(part, probes.v[part].reshape(shape))
        for i, g in zip(problem.inputs, grads):
            if g.is_complex():
                value = _dot(g.real, probes.ur[i]) + 1j * _dot(g.imag, probes.ui[i])
            else:
                value = _dot(g, probes.ur[i])
            scalars[(i, part)] = value
    return scalars
