"""dualgen.gradcheck against torch.autograd.gradcheck, same functions, same settings,
one process. Prints Markdown tables: the time ratio dualgen / torch per function
and mode, and dualgen's fast-mode speedup over slow mode on inputs of a few
thousand elements.

    python bench/gradcheck_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import dualgen

F64, C128 = torch.float64, torch.complex128


def _leaf(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        real = torch.randn(*shape, generator=g, dtype=F64)
        imag = torch.randn(*shape, generator=g, dtype=F64)
        return torch.complex(real, imag).requires_grad_()
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()


def _view_then_inplace(x):
    y = x.clone()
    y[:, 1:3].mul_(2.0)
    return y.t()


def _setitem(x):
    y = torch.zeros(x.shape[0] + 2, x.shape[1], dtype=x.dtype)
    y[1:-1] = x.exp()
    return y


def cases(rows: int, cols: int) -> dict:
    """name -> (function, inputs): about ten representative functions."""
    x = _leaf(rows, cols, seed=1)
    w = _leaf(cols, 3, seed=2)
    b = _leaf(3, seed=3)
    z = _leaf(rows, cols, dtype=C128, seed=4)
    return {
        "elementwise": (lambda x: x.sin().exp() * x, (x,)),
        "matmul": (lambda x, w: x @ w, (x, w)),
        "linear + tanh": (lambda x, w, b: torch.addmm(b, x, w).tanh(), (x, w, b)),
        "softmax": (lambda x: x.softmax(-1), (x,)),
        "reduction": (lambda x: (x * x).sum(1), (x,)),
        "max.dim": (lambda x: x.max(1).values, (x,)),
        "cat": (lambda x: torch.cat([x, x * 2.0]), (x,)),
        "view, in-place": (_view_then_inplace, (x,)),
        "setitem": (_setitem, (x,)),
        "complex -> real": (lambda z: z.abs(), (z,)),
        "complex": (lambda z: z.exp() * z, (z,)),
    }


def _time(check, fn, inputs, kwargs: dict, repeats: int) -> float:
    """Median seconds of `check(fn, inputs, **kwargs)`, which must pass."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        assert check(fn, inputs, **kwargs)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def compare(repeats: int) -> None:
    settings = {
        "slow, backward": {},
        "slow, forward + backward": {"check_forward_ad": True},
        "fast, backward": {"fast_mode": True},
        "fast, forward + backward": {"fast_mode": True, "check_forward_ad": True},
    }
    print("## dualgen.gradcheck / torch.autograd.gradcheck (4 x 5 inputs)\n")
    print("| function | " + " | ".join(settings) + " |")
    print("|---|" + "---|" * len(settings))
    ratios = {name: [] for name in settings}
    for name, (fn, inputs) in cases(4, 5).items():
        cells = []
        for setting, kwargs in settings.items():
            # Interleaved, warmed up: both sides see the same machine state.
            dualgen.gradcheck(fn, inputs, **kwargs)
            torch.autograd.gradcheck(fn, inputs, **kwargs)
            ours = _time(dualgen.gradcheck, fn, inputs, kwargs, repeats)
            theirs = _time(torch.autograd.gradcheck, fn, inputs, kwargs, repeats)
            ratios[setting].append(ours / theirs)
            cells.append(f"{ours / theirs:.2f}x ({ours * 1e3:.1f} ms)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    geo = [statistics.geometric_mean(ratios[s]) for s in settings]
    print("| geometric mean | " + " | ".join(f"{g:.2f}x" for g in geo) + " |\n")


def speedup(rows: int, cols: int) -> None:
    chosen = (
        "elementwise",
        "softmax",
        "reduction",
        "view, in-place",
        "complex -> real",
    )
    print(
        f"## dualgen fast mode vs slow mode ({rows} x {cols} = {rows * cols} elements)\n"
    )
    print("| function | slow | fast | speedup |")
    print("|---|---|---|---|")
    all_cases = cases(rows, cols)
    for name in chosen:
        fn, inputs = all_cases[name]
        kwargs = {"check_forward_ad": True}
        slow = _time(dualgen.gradcheck, fn, inputs, kwargs, 1)
        fast = _time(dualgen.gradcheck, fn, inputs, {**kwargs, "fast_mode": True}, 3)
        print(f"| {name} | {slow:.2f} s | {fast * 1e3:.1f} ms | {slow / fast:.0f}x |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller")
    args = parser.parse_args()
    torch.set_num_threads(1)
    compare(repeats=3 if args.quick else 7)
    speedup(*((20, 50) if args.quick else (40, 50)))


if __name__ == "__main__":
    main()
