"""Outputs that dualgen gives a tangent and native does not.

Native forward AD gives the statistics that layer and batch norm save (mean,
rstd, invstd) and the LU factorization that det, slogdet and solve save no
tangent; dualgen gives them one, because the ops' own formulas read them and, at an
outer level (nested levels, forward over reverse), they must move with the input.
There native has no reference: such a tangent must equal the central difference
of that output along the same tangents.
"""

from __future__ import annotations

import torch

STEP = 1e-6


def _is_diff(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _shifted(sample, tangents, scale: float):
    pending = iter(tangents)

    def shift(v):
        if isinstance(v, torch.Tensor):
            return v + scale * next(pending) if _is_diff(v) else v
        if isinstance(v, (list, tuple)):
            return type(v)(shift(x) for x in v)
        if isinstance(v, dict):
            return {k: shift(x) for k, x in v.items()}
        return v

    return shift((sample.input, sample.args, sample.kwargs))


def _outputs(op, args) -> list:
    flat = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        else:
            flat.append(v)

    with torch.no_grad():
        walk(op(args[0], *args[1], **args[2]))
    return flat


def extra_tangents_hold(op, sample, tangents, got, expected) -> tuple[list, str | None]:
    """`expected` with native's missing tangents replaced by dualgen's where those
    equal central differences, and the first output where one does not (None if
    all hold)."""
    extra = [
        k
        for k, ((_, t), (_, et)) in enumerate(zip(got, expected))
        if t is not None and et is None
    ]
    if not extra:
        return expected, None
    plus = _outputs(op, _shifted(sample, tangents, STEP))
    minus = _outputs(op, _shifted(sample, tangents, -STEP))
    completed = list(expected)
    for k in extra:
        difference = (plus[k] - minus[k]) / (2 * STEP)
        tangent = got[k][1]
        if not torch.allclose(tangent, difference, rtol=1e-5, atol=1e-5):
            error = (tangent - difference).abs().max().item()
            return expected, (
                f"output {k}: a tangent where native has none, {error:.2e} from "
                "central differences"
            )
        completed[k] = (expected[k][0], tangent)
    return completed, None
