"""The Taylor-mode OpInfo sweep: dualgen.jet at order 3 along a general curve
x(t) = x0 + x1 t + x2 t²/2 + x3 t³/6 (x1, x2, x3 random and non-zero), for every
OpInfo that supports forward AD, float64 and complex128, against the same
derivatives composed from dualgen's nested levels:

    y1 = Df[x1]
    y2 = D2f[x1, x1] + Df[x2]
    y3 = D3f[x1, x1, x1] + 3 D2f[x1, x2] + Df[x3]

The nested levels are the reference because opinfo_nested.py judges them by
finite differences (orders 2 and 3); torch.func's nested jvp is not one (it reads
saved statistics as constants at outer levels).

    python tests/coverage/opinfo_jet.py [--ops NAME ...] [--samples N]
"""

from __future__ import annotations

import argparse

import torch
from nested_oracles import Verdict, directions, jvp, second_order, third_order
from opinfo_nested import _RUNS, SAMPLES, _reference, check, nested_ops
from opinfo_sweep import _differs, dtypes_for, run_all

import dualgen

MODE = "jet3"


def curve_derivatives(p, at, x1, x2, x3) -> list[list[torch.Tensor]]:
    """y1, y2, y3 of the curve, per output, from nested levels."""
    d1 = jvp(p, at, x1)
    d11 = second_order(p, at, x1, x1)
    d12 = second_order(p, at, x1, x2)
    y2 = [a + b for a, b in zip(d11, jvp(p, at, x2))]
    d111 = third_order(p, at, x1, x1, x1)
    y3 = [a + 3 * b + c for a, b, c in zip(d111, d12, jvp(p, at, x3))]
    return [list(orders) for orders in zip(d1, y2, y3)]


def _jet3(p, g) -> Verdict:
    x1, x2, x3 = directions(p, g), directions(p, g), directions(p, g)
    at = p.at()
    expected = _reference(curve_derivatives, p, at, x1, x2, x3)
    values, got = dualgen.jet(
        lambda *xs: tuple(p(list(xs))), at, [list(s) for s in zip(x1, x2, x3)]
    )
    for k, (value, want) in enumerate(zip(p(p.at()), expected)):
        problem = _differs(values[k], value)
        if problem:
            return Verdict("wrong", float("inf"), f"output {k} value: {problem}")
        for order, (a, b) in enumerate(zip(got[k], want), start=1):
            problem = _differs(a, b)
            if problem:
                error = float((a - b).abs().max() / (b.abs().max() + 1e-12))
                return Verdict("wrong", error, f"output {k} y{order}: {problem}")
    return Verdict("pass", 0.0, "")


_RUNS[MODE] = _jet3


def cases(names=None):
    for op in nested_ops():
        if names is None or op.name in names:
            for dtype in dtypes_for(op):
                yield op, dtype


def sweep(names=None, samples=SAMPLES, progress=True):
    todo = [(op, dtype, MODE, samples) for op, dtype in cases(names)]
    return run_all(todo, check, progress)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+")
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args()
    results = sweep(set(args.ops) if args.ops else None, args.samples)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
        if r.status not in ("pass", "n/a"):
            print(f"{r.status}: {r.name} {r.dtype}: {r.detail}")
    print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
