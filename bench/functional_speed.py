"""Benchmark: the high-level API (`dualgen.functional`, `dualgen.func`) against
torch's, in one process, interleaved rounds, medians; float32, 2 threads.

- `jacobian(f, x, strategy="forward-mode", vectorize=True)` of an MLP with 64
  inputs and 64 outputs, against torch's same call; and dualgen's
  `vectorize=False` (column by column, where torch raises) against its own
  `vectorize=True`.
- `hvp` of a compute-bound loss (a 512×512 weight, a batch of 256): dualgen's
  forward over reverse (`fw_mode=True`, the default) against torch's double
  backward.
- `dualgen.func.jacfwd` and `hessian` against torch.func's on the same MLP.
- The same three (the vectorized forward-mode `jacobian`, `jacfwd`, `hessian`)
  on a small convnet: an 8x8 image (64 inputs) through two 3x3 convolutions
  with tanh and a linear layer to 10 outputs.
- `jacfwd` through the ops that index, shift, pad or resample (padding, max
  pooling, upsampling, sort, repeat, cumsum).

Each round times as many calls as last about 50 ms (one call of a millisecond
is mostly noise). torch's calls run as torch ships; the batching rules dualgen
gives torch's legacy vmap (which both vectorized jacobians batch tangents with)
are removed while they run, and one row times torch's own call with them and
without.

    python bench/functional_speed.py [--rounds 11] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import allocator
import torch
import torch.autograd.functional as torch_af
import torch.nn.functional as F

import dualgen.func as dfunc
import dualgen.functional as dual_af
from dualgen.hot_path import policy as hot_path


def mlp(width: int = 64):
    torch.manual_seed(0)
    layers = [torch.randn(width, width) / width**0.5 for _ in range(3)]

    def f(x):
        for w in layers:
            x = torch.tanh(w @ x)
        return x

    return f, torch.randn(width)


def convnet():
    """An 8x8 image, given flat (64 inputs), through two 3x3 convolutions with
    tanh and a linear layer to 10 outputs."""
    torch.manual_seed(2)
    conv1, conv2 = torch.randn(4, 1, 3, 3) / 3, torch.randn(4, 4, 3, 3) / 6
    linear = torch.randn(10, 4 * 8 * 8) / 16

    def f(x):
        h = torch.tanh(F.conv2d(x.view(1, 1, 8, 8), conv1, padding=1))
        h = torch.tanh(F.conv2d(h, conv2, padding=1))
        return F.linear(h.flatten(), linear)

    return f, torch.randn(64)


def indexing():
    """An 8x8 image, given flat (64 inputs), through the ops that index, shift,
    pad or resample a tensor (reflection padding, max pooling, sort, repeat,
    cumsum, upsampling), whose tangents ran a column at a time before their
    batching rules."""

    def f(x):
        h = F.pad(x.view(1, 1, 8, 8), (1, 1, 1, 1), mode="reflect")
        h = F.interpolate(F.max_pool2d(h, 2), scale_factor=2)
        return h.flatten().sort().values.repeat(2).cumsum(0)

    return f, torch.randn(64)


def loss_of_weight(size: int = 512, batch: int = 256):
    torch.manual_seed(1)
    x, y = torch.randn(batch, size), torch.randn(batch, size)

    def loss(w):
        return ((torch.tanh(x @ w) - y) ** 2).mean()

    return loss, torch.randn(size, size) / size**0.5, torch.randn(size, size)


def forward_jacobian(af, f, x, vectorize=True):
    """af.jacobian of f at x (af: torch's autograd.functional or dualgen's)."""
    return lambda: af.jacobian(f, x, strategy="forward-mode", vectorize=vectorize)


def transforms(model: str, outputs: int, f, x) -> dict:
    """The vectorized forward-mode jacobian, jacfwd and hessian (of the sum of
    the outputs) of f, a model of 64 inputs, each against torch's."""

    def scalar(y):
        return f(y).sum()

    return {
        f"jacobian, forward-mode, vectorize=True ({model} 64 -> {outputs})": {
            "torch": forward_jacobian(torch_af, f, x),
            "dualgen": forward_jacobian(dual_af, f, x),
        },
        f"func.jacfwd ({model} 64 -> {outputs})": {
            "torch": lambda: torch.func.jacfwd(f)(x),
            "dualgen": lambda: dfunc.jacfwd(f)(x),
        },
        f"func.hessian ({model} 64 -> sum)": {
            "torch": lambda: torch.func.hessian(scalar)(x),
            "dualgen": lambda: dfunc.hessian(scalar)(x),
        },
    }


def cases() -> dict:
    f, x = mlp()
    loss, w, v = loss_of_weight()
    index_f, index_x = indexing()

    return {
        **transforms("MLP", 64, f, x),
        "jacobian, forward-mode: dualgen vectorize=False against True": {
            "torch": forward_jacobian(dual_af, f, x),
            "dualgen": forward_jacobian(dual_af, f, x, vectorize=False),
        },
        # (Both columns are torch's call; the rules are on where it says dualgen.)
        "torch's jacobian, forward-mode, vectorize=True: with dualgen's batching "
        "rules against without": {
            "torch": forward_jacobian(torch_af, f, x),
            "dualgen": forward_jacobian(torch_af, f, x),
        },
        "hvp, 512x512 weight (dualgen fw_mode=True)": {
            "torch": lambda: torch_af.hvp(loss, w, v),
            "dualgen": lambda: dual_af.hvp(loss, w, v),
        },
        **transforms("convnet", 10, *convnet()),
        "func.jacfwd (indexing ops 64 -> 200)": {
            "torch": lambda: torch.func.jacfwd(index_f)(index_x),
            "dualgen": lambda: dfunc.jacfwd(index_f)(index_x),
        },
    }


# Cases whose "torch" column is dualgen's own baseline, not torch's call.
DUALGEN_BASELINE = {"jacobian, forward-mode: dualgen vectorize=False against True"}


def timed(case: str, implementation: str, fn, calls: int = 1) -> float:
    """The time of one call of fn, averaged over `calls` calls; torch's calls run
    as torch ships, without the legacy-vmap batching rules dualgen registers
    (csrc/dualgen/batching.cpp), which speed torch's own vectorized jacobians up
    too."""
    as_shipped = implementation == "torch" and case not in DUALGEN_BASELINE
    if as_shipped:
        hot_path.set_batching_rules(False)
    try:
        return seconds(fn, calls)
    finally:
        if as_shipped:
            hot_path.set_batching_rules(True)


def seconds(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


# Each round times enough calls to last about this long: a single call of a
# millisecond is mostly the timer's and the scheduler's noise.
ROUND_SECONDS = 0.05


def row(name: str, fns: dict, rounds: int) -> str:
    """The table's row for one case: medians of interleaved rounds, or which
    side raises what (a release that cannot run the case)."""
    calls = {}
    for k, fn in fns.items():
        try:
            once = timed(name, k, fn)  # warm up, and size the rounds
        except Exception as error:  # noqa: BLE001 - reported in the table
            first_line = (str(error).splitlines() or [""])[0][:60]
            reason = f"{k} raises {type(error).__name__}: {first_line}"
            return f"| {name} | {reason} | | |"
        calls[k] = max(1, round(ROUND_SECONDS / max(once, 1e-6)))
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(timed(name, k, fn, calls[k]))
    ours, theirs = (statistics.median(times[k]) for k in ("dualgen", "torch"))
    return (
        f"| {name} | {theirs * 1e3:.2f} ms | {ours * 1e3:.2f} ms "
        f"| {ours / theirs:.2f}x |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--threads", type=int, default=2)
    args, heap = allocator.parse_args(parser)
    torch.set_num_threads(args.threads)
    print("| case | torch (or baseline) | dualgen | dualgen / torch |")
    print("|---|---|---|---|")
    for name, fns in cases().items():
        print(row(name, fns, args.rounds), flush=True)
    print(
        f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads, float32, "
        f"median of {args.rounds} rounds, {heap}"
    )


if __name__ == "__main__":
    main()
