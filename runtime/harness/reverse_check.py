"""Reverse over forward: a tangent's own gradient against finite differences.

Forward-mode training (consistency models, MeanFlow, forward gradients with
parameters that require grad) backpropagates a loss of the tangent, so autograd
differentiates the JVP formulas themselves. A formula can compute the right
tangent and still give it the wrong gradient: when it reads an output autograd
gives no gradient (attention's logsumexp, weight norm's norms), which autograd
then holds constant, or calls an op autograd cannot differentiate.

`reverse_over_forward_check` draws a tangent u per input, a weight w per output
autograd differentiates and a direction d per input, and compares the gradient
of Q(x) = sum_k <tangent_k(x; u), w_k> along d with central differences of Q.
"""

from __future__ import annotations

import torch

from .. import forward_ad as fwAD
from .compare import GradcheckError
from .problem import Problem


class NotApplicable(Exception):
    """Q has no derivative to compare at this sample: central differences of two
    step sizes disagree (a tie, a jump of a tangent). A kink of Q itself, which
    differences average over, is not seen: samples avoid kinks, as gradcheck's do."""


def reverse_over_forward_check(
    func, inputs, *, eps: float = 1e-6, atol: float = 1e-6, rtol: float = 1e-4
) -> bool:
    """True if autograd's gradient of Q (above) along a random direction equals
    central differences of Q; raises GradcheckError where it does not and
    NotApplicable where Q is not smooth at `inputs`. Errors of torch's autograd
    (an output dtype or argument it does not differentiate) propagate."""
    problem = Problem.make(func, inputs, masked=None)
    generator = torch.Generator().manual_seed(0)
    values = problem.values
    tangents = {i: _normal_like(values[i], generator) for i in problem.inputs}
    directions = {i: _normal_like(values[i], generator) for i in problem.inputs}
    leaves = _with(
        values, {i: values[i].clone().requires_grad_() for i in problem.inputs}
    )
    with torch.enable_grad():
        outputs = problem.evaluate(leaves)
    weights = [
        (
            _normal_like(o, generator)
            if isinstance(o, torch.Tensor) and o.requires_grad
            else None
        )
        for o in outputs
    ]

    def quantity(at):
        with fwAD.dual_level():
            duals = _with(
                at, {i: fwAD.make_dual(at[i], t) for i, t in tangents.items()}
            )
            found = [
                None if weight is None else fwAD.unpack_dual(out).tangent
                for out, weight in zip(problem.evaluate(duals), weights)
            ]
        # (summed outside the level: the spec under test may lack rules for these ops)
        total = torch.zeros((), dtype=torch.float64)
        for tangent, weight in zip(found, weights):
            if tangent is not None:
                total = total + _inner(tangent, weight)
        return total

    total = quantity(leaves)
    along = 0.0
    if total.requires_grad:
        wrt = [leaves[i] for i in problem.inputs]
        grads = torch.autograd.grad(total, wrt, allow_unused=True)
        along = sum(
            _inner(g, directions[i]).item()
            for g, i in zip(grads, problem.inputs)
            if g is not None
        )

    def difference(step):
        with torch.no_grad():
            plus = _with(
                values, {i: values[i] + step * d for i, d in directions.items()}
            )
            minus = _with(
                values, {i: values[i] - step * d for i, d in directions.items()}
            )
            return (quantity(plus).item() - quantity(minus).item()) / (2 * step)

    expected, coarse = difference(eps), difference(10 * eps)
    tolerance = atol + rtol * max(abs(expected), abs(along))
    if abs(expected - coarse) > tolerance:
        raise NotApplicable(
            f"not smooth here: central differences {expected:.6g} (step {eps:g}) "
            f"and {coarse:.6g} (step {10 * eps:g}) disagree"
        )
    if abs(along - expected) > tolerance:
        raise GradcheckError(
            f"Reverse over forward mismatch in {problem.name}: the gradient of "
            f"<tangent, w> along a random direction is {along:.10g}, central "
            f"differences give {expected:.10g}"
        )
    return True


def _normal_like(x: torch.Tensor, generator) -> torch.Tensor:
    wide = torch.complex128 if x.is_complex() else torch.float64
    return torch.randn(x.shape, generator=generator, dtype=wide).to(x.dtype)


def _inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Re <a, b>: the real inner product, as autograd's gradients pair with
    directions for complex inputs."""
    a, b = a.resolve_conj().resolve_neg(), b.resolve_conj().resolve_neg()
    if a.is_complex() or b.is_complex():
        return (a.to(torch.complex128).conj() * b.to(torch.complex128)).real.sum()
    return (a.to(torch.float64) * b.to(torch.float64)).sum()


def _with(values, replaced: dict) -> list:
    return [replaced.get(i, v) for i, v in enumerate(values)]
