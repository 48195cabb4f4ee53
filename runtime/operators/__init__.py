"""Linear PDE operators by collapsed Taylor mode (docs/taylor.md):

    g = dualgen.operators.laplacian(f)          # g(x) -> (f(x), Δf(x))
    g = dualgen.operators.laplacian(f, randomization=("rademacher", 16))
    g = dualgen.operators.laplacian(f, weighting=(apply_S, rank))
    g = dualgen.operators.bilaplacian(f)        # Σ_ij ∂⁴f / ∂x_i² ∂x_j²

`f` maps one datum x (a tensor of any shape) to a tensor; the operator is taken
per output element, over all of x's elements. `torch.vmap(g)` applies it to a
batch, and autograd differentiates through it (a module's parameters are read at
every call). Each is a weighted sum over directions v of d^K/dt^K f(x + t v),
propagated collapsed (collapse.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack

from .collapse import build

__all__ = ["bilaplacian", "laplacian"]


def laplacian(
    f: Callable, *, randomization=None, weighting=None, collapsed=True
) -> Callable:
    """g(x) -> (f(x), Δf(x)); with `weighting=(apply_S, rank)`, the weighted
    Laplacian Σ_ij C_ij ∂²f/∂x_i∂x_j for C(x) = S(x) S(x)ᵀ, where
    apply_S(x, V) = V @ S(x).T; with `randomization=("rademacher" | "normal", S)`,
    the unbiased estimate from S random directions. `collapsed=False` propagates
    one series per direction instead (for comparison: the same values)."""
    sampler = _sampler(randomization, ("rademacher", "normal"), "laplacian")

    def directions(x):
        size = x.numel() if weighting is None else weighting[1]
        if sampler is None:
            basis = torch.eye(size, dtype=x.dtype, device=x.device)
            weights = torch.ones(size, dtype=x.dtype, device=x.device)
        else:
            basis = sampler(size, x)
            weights = torch.full((len(basis),), 1 / len(basis), dtype=x.dtype)
        if weighting is not None:
            basis = weighting[0](x, basis)
        return basis.reshape(len(basis), *x.shape), weights.to(x.device)

    return _Operator(f, 2, directions, collapsed)


def bilaplacian(f: Callable, *, randomization=None, collapsed=True) -> Callable:
    """g(x) -> (f(x), Δ²f(x)) = Σ_ij ∂⁴f/∂x_i²∂x_j²: exact from the D² fourth
    derivatives along e_i and e_i ± e_j, or with `randomization=("normal", S)`
    unbiased from E[D⁴f[v]] = 3 Δ²f for standard normal v."""
    sampler = _sampler(randomization, ("normal",), "bilaplacian")

    def directions(x):
        size = x.numel()
        options = {"dtype": x.dtype, "device": x.device}
        if sampler is not None:
            basis = sampler(size, x)
            weights = torch.full((len(basis),), 1 / (3 * len(basis)), **options)
            return basis.reshape(len(basis), *x.shape), weights
        eye = torch.eye(size, **options)
        i, j = torch.triu_indices(size, size, 1, device=x.device)
        basis = torch.cat([eye, eye[i] + eye[j], eye[i] - eye[j]])
        # ∂⁴f/∂x_i²∂x_j² = (D⁴f[e_i+e_j] + D⁴f[e_i-e_j] - 2 D⁴f[e_i] - 2 D⁴f[e_j]) / 12
        weights = torch.cat(
            [
                torch.full((size,), 1 - (size - 1) / 3, **options),
                torch.full((2 * len(i),), 1 / 6, **options),
            ]
        )
        return basis.reshape(len(basis), *x.shape), weights

    return _Operator(f, 4, directions, collapsed)


def _sampler(randomization, kinds, name):
    if randomization is None:
        return None
    kind, samples = randomization
    if kind not in kinds or not isinstance(samples, int) or samples < 1:
        raise ValueError(
            f"{name}: randomization is (kind, samples) with kind one of "
            f"{', '.join(kinds)} and samples a positive int, got {randomization!r}"
        )

    def sample(size, x):
        options = {"dtype": x.dtype, "device": x.device}
        if kind == "normal":
            return torch.randn(samples, size, **options)
        return torch.randint(0, 2, (samples, size), **options) * 2 - 1

    return sample


class _Operator:
    """g(x): the collapsed program of `f` for x's shape, dtype and device (built
    on first use), run on x's directions."""

    def __init__(self, f, order, directions, collapsed):
        self.f, self.order, self.directions = f, order, directions
        self.collapse = collapsed
        self.programs: dict = {}

    def __call__(self, x: torch.Tensor):
        parameters, call = _parametrised(self.f)
        directions, weights = self.directions(x)
        key = (tuple(x.shape), x.dtype, x.device, len(directions)) + tuple(
            (tuple(p.shape), p.dtype) for p in parameters
        )
        built = self.programs.get(key)
        if built is None:
            # Built outside any torch.vmap the call is under (the program is
            # per datum; vmap batches it when it runs).
            with temporarily_clear_interpreter_stack(), torch.no_grad():
                example = torch.randn(x.shape, dtype=x.dtype, device=x.device)
                plain = tuple(p.detach() for p in parameters)
                built = self.programs[key] = build(
                    call, example, plain, self.order, len(directions), self.collapse
                )
        return built.program(x, directions, weights, *parameters)

    def collapsed(self) -> bool:
        """Whether every program built so far propagates the sum (a test's view)."""
        return all(p.collapsed for p in self.programs.values())


def _parametrised(f):
    """f's parameters and buffers, and f as a function of (x, *them): a module's
    are read at every call, so training updates and autograd reach them."""
    if not isinstance(f, torch.nn.Module):
        return (), f
    names = [n for n, _ in f.named_parameters()] + [n for n, _ in f.named_buffers()]
    tensors = tuple(p for _, p in f.named_parameters()) + tuple(
        b for _, b in f.named_buffers()
    )

    def call(x, *values):
        return torch.func.functional_call(f, dict(zip(names, values)), (x,))

    return tensors, call
