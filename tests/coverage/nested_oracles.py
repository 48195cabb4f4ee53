"""The pieces of the nested OpInfo sweep (opinfo_nested.py): an OpInfo sample as a
function of its differentiable inputs, dualgen's higher-order runs of it, the
finite-difference oracles and the judge that weighs them.

Every higher derivative is judged against central differences of a derivative one
order lower whose correctness is established elsewhere (first order: the OpInfo
sweep against native; the VJP: native reverse mode), confirmed by a second,
independent difference scheme before dualgen is called wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from opinfo_sweep import _is_diff, _map, _random_like, flatten

import dualgen.forward_ad as fwAD

# Steps for first differences of a derivative, tried in order: truncation ~h^2,
# roundoff ~eps/h, both below TOL for smooth ops at 1e-4; the others rescue ops
# with large higher derivatives (1e-5; 1e-6 for tan near a pole) or large values
# (1e-3).
STEPS = (1e-4, 1e-5, 1e-3, 1e-6)
# Second differences: roundoff ~eps/h^2 makes 1e-5 the smallest useful step.
STEPS2 = (1e-4, 1e-3, 1e-5)
ONE_SIDED = 1e-6  # the continuity check of hold_non_smooth_inputs
# Agreement: max |a - b| <= TOL * max(1, |a|, |b|) per output (finite elements).
TOL = 1e-5
# Wrong only beyond this: errors of the rules read as O(1); between TOL and this,
# the differences' own error (an unlucky step) is as likely.
MARGINAL = 1e-3


class Problem:
    """An OpInfo sample as a function of its floating and complex tensors (the
    inputs, in traversal order; lists and kwargs included) to its floating and
    complex outputs: the function gradcheck differentiates in PyTorch's OpInfo
    tests, through the op's gradcheck_wrapper (Hermitian and triangular inputs
    made so for every direction, masked-out elements zeroed) and the sample's
    output_process_fn_grad (gauge-free outputs of svd, eig). `at` gives fresh
    copies: samples that update an input in place (batch_norm's running
    statistics) stay as they were."""

    def __init__(self, op, sample):
        self.op = op
        self.process = sample.output_process_fn_grad
        self.structure = (sample.input, sample.args, sample.kwargs)
        self.inputs = []
        _map(self.structure, lambda t: _is_diff(t) and self.inputs.append(t))
        # Inputs held constant (see hold_non_smooth_inputs); single precision
        # ones from the start (cov's float32 aweights): their differences are
        # noise at these steps.
        self.held = [
            x.dtype not in (torch.float64, torch.complex128) for x in self.inputs
        ]
        self.kept = None  # the outputs compared (see keep_differentiable_outputs)

    def __call__(self, values) -> list[torch.Tensor]:
        pending = iter(values)
        args = _map(self.structure, lambda t: next(pending) if _is_diff(t) else t)
        out = self.op.gradcheck_wrapper(self.op.get_op(), args[0], *args[1], **args[2])
        outs = [o for o in flatten(self.process(out)) if _is_diff(o)]
        return outs if self.kept is None else [o for o, k in zip(outs, self.kept) if k]

    def at(self, *steps) -> list[torch.Tensor]:
        """The inputs moved by sum(h * d) over (h, directions) pairs."""
        values = [x.clone() for x in self.inputs]
        for h, directions in steps:
            values = [x + h * d for x, d in zip(values, directions)]
        return values


def directions(problem, generator) -> list[torch.Tensor]:
    """A random direction per input (zeros for the inputs held constant)."""
    return [
        torch.zeros_like(x) if held else _random_like(x, generator).to(x.dtype)
        for x, held in zip(problem.inputs, problem.held)
    ]


def keep_differentiable_outputs(problem, generator) -> None:
    """Compare only the outputs that get a first-order tangent from tangents on
    every input: the others are not differentiated by design (native's too:
    native_batch_norm's saved statistics before they carried tangents); higher
    orders of them are not defined."""
    problem.kept = None
    tangents = directions(problem, generator)
    with fwAD.dual_level():
        outs = problem([fwAD.make_dual(x, t) for x, t in zip(problem.at(), tangents)])
        problem.kept = [fwAD.unpack_dual(o).tangent is not None for o in outs]


def hold_non_smooth_inputs(problem, generator) -> None:
    """Hold constant each input along which differences of f do not reproduce
    dualgen's first-order JVP (checked against native): a float label compared
    with values (cosine_embedding_loss's target: off +-1 the loss is 0, on both
    sides, so central differences see a smooth 0: the one-sided ones catch the
    jump), running statistics that native's rule treats as constants. No order of
    derivative along such an input is what differences measure."""
    value = problem(problem.at())
    for i, x in enumerate(problem.inputs):
        if not problem.held[i]:
            direction = [torch.zeros_like(y) for y in problem.inputs]
            direction[i] = _random_like(x, generator).to(x.dtype)
            problem.held[i] = not _smooth_along(problem, value, direction)


def _smooth_along(problem, value, direction) -> bool:
    first = jvp(problem, problem.at(), direction)

    def moved(h):
        return problem(problem.at((h, direction)))

    def close(fd, tol=TOL):
        d = distance(first, fd)
        return d is not None and d <= tol

    # One-sided differences at a small step: O(h) error, a loose tolerance; a
    # jump makes them 1/h.
    ahead = [(a - b) / ONE_SIDED for a, b in zip(moved(ONE_SIDED), value)]
    behind = [(b - a) / ONE_SIDED for a, b in zip(moved(-ONE_SIDED), value)]
    if not (close(ahead, 1e-3) and close(behind, 1e-3)):
        return False
    return any(close(fd) for _, fd in _estimates(lambda h: central(moved, h), STEPS))


def _zeros_if_none(t, like):
    return torch.zeros_like(like) if t is None else t


def _plain(t, *levels):
    for level in levels:
        t = fwAD.unpack_dual(t, level=level).primal
    return t.detach().clone()


def _tangent(t, level):
    """`t`'s tangent at `level` (None when absent), still dual at other levels."""
    if t is None:
        return None
    return fwAD.unpack_dual(t, level=level).tangent


# ------------------------------------------------------------------------------------
# dualgen's runs


def jvp(problem, values, tangents) -> list[torch.Tensor]:
    """First order: J(values) tangents, one level (zeros where no tangent)."""
    with fwAD.dual_level():
        outs = problem([fwAD.make_dual(x, t) for x, t in zip(values, tangents)])
        return [
            _zeros_if_none(fwAD.unpack_dual(o).tangent, o).detach().clone()
            for o in outs
        ]


def nested2(problem, values, us, vs):
    """Two levels, u inner and v outer: (values, J u, J v, D2 f[u, v]) per output,
    each read at the level it belongs to."""
    with fwAD.dual_level() as outer:
        xs = [fwAD.make_dual(x, v, level=outer) for x, v in zip(values, vs)]
        with fwAD.dual_level() as inner:
            outs = problem([fwAD.make_dual(x, u, level=inner) for x, u in zip(xs, us)])
            result = []
            for o in outs:
                primal, ju = fwAD.unpack_dual(o, level=inner)
                jv = fwAD.unpack_dual(primal, level=outer).tangent
                second = _tangent(ju, outer)
                result.append(
                    tuple(
                        _zeros_if_none(t, o).detach().clone()
                        for t in (
                            _plain(primal, outer),
                            None if ju is None else _plain(ju, outer),
                            jv,
                            second,
                        )
                    )
                )
    return result


def second_order(problem, values, us, vs) -> list[torch.Tensor]:
    return [r[3] for r in nested2(problem, values, us, vs)]


def third_order(problem, values, us, vs, ws) -> list[torch.Tensor]:
    """Three levels, w outermost, u innermost: D3 f[u, v, w] per output."""
    with fwAD.dual_level() as l1:
        x1 = [fwAD.make_dual(x, w, level=l1) for x, w in zip(values, ws)]
        with fwAD.dual_level() as l2:
            x2 = [fwAD.make_dual(x, v, level=l2) for x, v in zip(x1, vs)]
            with fwAD.dual_level() as l3:
                x3 = [fwAD.make_dual(x, u, level=l3) for x, u in zip(x2, us)]
                result = []
                for o in problem(x3):
                    t = _tangent(_tangent(_tangent(o, l3), l2), l1)
                    result.append(_zeros_if_none(t, o).detach().clone())
    return result


def _leaves(values):
    return [x.detach().clone().requires_grad_() for x in values]


def _grads(outputs, leaves, cotangents=None):
    """Gradients of the outputs that require grad (zeros for unused leaves)."""
    pairs = [
        (o, c)
        for o, c in zip(outputs, cotangents or [None] * len(outputs))
        if o.requires_grad
    ]
    grads = [None] * len(leaves)
    if pairs:
        grads = torch.autograd.grad(
            [o for o, _ in pairs],
            leaves,
            None if cotangents is None else [c for _, c in pairs],
            allow_unused=True,
        )
    return grads


def vjp(problem, values, cotangents) -> list[torch.Tensor]:
    """First order, reverse: native autograd, no level (the reference)."""
    leaves = _leaves(values)
    grads = _grads(problem(leaves), leaves, cotangents)
    return [_zeros_if_none(g, x).detach() for g, x in zip(grads, leaves)]


def forward_over_reverse(problem, values, vs, cotangents) -> list[torch.Tensor]:
    """The tangents (along v) of the gradients torch.autograd.grad computes from
    dual inputs: H_c v per input."""
    leaves = _leaves(values)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, v) for x, v in zip(leaves, vs)]
        grads = _grads(problem(duals), leaves, cotangents)
        return [
            _zeros_if_none(None if g is None else fwAD.unpack_dual(g).tangent, x)
            .detach()
            .clone()
            for g, x in zip(grads, leaves)
        ]


def reverse_over_forward(problem, values, us, cotangents) -> list[torch.Tensor]:
    """The gradient, with respect to the primal inputs, of <J u, c>: the tangents
    dualgen computes, differentiated by autograd: H_c u per input."""
    leaves = _leaves(values)
    with fwAD.dual_level():
        outs = problem([fwAD.make_dual(x, u) for x, u in zip(leaves, us)])
        terms = []
        for o, c in zip(outs, cotangents):
            t = fwAD.unpack_dual(o).tangent
            if t is not None and t.requires_grad:
                terms.append((t * c.conj()).sum().real)  # autograd's pairing
        grads = _grads([sum(terms)], leaves) if terms else [None] * len(leaves)
    return [_zeros_if_none(g, x).detach() for g, x in zip(grads, leaves)]


# ------------------------------------------------------------------------------------
# difference schemes


def central(fn, h):
    """(fn(h) - fn(-h)) / 2h, per output."""
    return [(a - b) / (2 * h) for a, b in zip(fn(h), fn(-h))]


def mixed(fn, h):
    """(fn(h, h) - fn(h, -h) - fn(-h, h) + fn(-h, -h)) / 4h^2, per output."""
    pp, pm, mp, mm = fn(h, h), fn(h, -h), fn(-h, h), fn(-h, -h)
    return [(a - b - c + d) / (4 * h * h) for a, b, c, d in zip(pp, pm, mp, mm)]


def inner(xs, ys) -> list[torch.Tensor]:
    """Re sum <x, y> over a list (conjugating x: the pairing autograd's
    cotangents use), as a one-element list: a projection."""
    total = sum((x.conj() * y).sum().real for x, y in zip(xs, ys))
    return [torch.as_tensor(total, dtype=torch.float64).reshape(1)]


# ------------------------------------------------------------------------------------
# the judge


def distance(got, reference) -> float | None:
    """max |got - ref| / max(1, |got|, |ref|), worst output, over the elements where
    `reference` is finite (got must be finite there); None: no finite element."""
    worst, seen = 0.0, False
    for g, r in zip(got, reference, strict=True):
        if g.shape != r.shape:
            return float("inf")
        mask = torch.isfinite(r)
        if not mask.any():
            continue
        seen = True
        g, r = g[mask], r[mask]
        if not torch.isfinite(g).all():
            return float("inf")
        scale = max(1.0, g.abs().max().item(), r.abs().max().item())
        worst = max(worst, (g - r).abs().max().item() / scale)
    return worst if seen else None


def _agree(a, b) -> bool:
    """Two oracles agree where both are finite."""
    masked = []
    for x, y in zip(a, b, strict=True):
        both = torch.isfinite(x) & torch.isfinite(y)
        masked.append((x[both], y[both]))
    d = distance([x for x, _ in masked], [y for _, y in masked])
    return d is not None and d <= TOL


@dataclass
class Verdict:
    status: str  # pass, wrong, unjudged
    error: float = 0.0  # dualgen's relative distance to the first oracle (best step)
    detail: str = ""


def _estimates(fn, steps):
    """(h, fn(h)) for each step, lazily; a step where the op refuses the moved
    point (a singular matrix, a domain error) is left out."""
    for h in steps:
        value = _attempt(fn, h)
        if value is not None:
            yield h, value


def _attempt(fn, h):
    try:
        return fn(h)
    except Exception:  # noqa: BLE001 (whatever the op raises, no estimate)
        return None


def judge(got, first, second, project=None, confirm=False) -> Verdict:
    """`got` against `first(h)`, differences of a trusted lower-order derivative,
    and `second(h)`, an independent scheme for the same quantity (`project` maps
    `got` and `first` onto what `second` estimates, where it estimates less).

    pass: got agrees with `first` at some step (with `confirm`, with `second` too:
    `first` is trusted only as far as that agreement goes). wrong: got agrees
    with neither, and the two oracles agree with each other at some steps.
    Otherwise unjudged: the oracles disagree (a kink, a discontinuity, an
    ill-conditioned point, an op that reads part of its input), or got agrees
    with `first` alone under `confirm`."""
    project = project or (lambda xs: xs)
    firsts, best = [], None
    for h, a in _estimates(first, STEPS):
        firsts.append((h, a))
        d = distance(got, a)
        if d is not None and (best is None or d < best[0]):
            best = (d, h)
        if d is not None and d <= TOL:
            if not confirm:
                return Verdict("pass", d)
            for _, b in _estimates(second, STEPS2):
                confirmed = distance(project(got), b)
                if confirmed is not None and confirmed <= TOL:
                    return Verdict("pass", d)
            return Verdict("unjudged", d, "agrees with the first oracle only")
    if best is None:
        return Verdict("unjudged", detail="no finite reference")
    if best[0] <= MARGINAL:  # close to agreeing: noise of the differences, or not
        return Verdict("unjudged", best[0], f"off by {best[0]:.2g} only")
    for hb, b in _estimates(second, STEPS2):
        for ha, a in firsts:
            if _agree(project(a), b):
                return Verdict(
                    "wrong",
                    best[0],
                    f"relative error {best[0]:.3g} (step {best[1]:g}); the oracles "
                    f"agree at steps {ha:g} and {hb:g}",
                )
    return Verdict("unjudged", best[0], "the oracles disagree")
