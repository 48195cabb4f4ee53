"""Benchmark: per-datum linear PDE operators of a batch by collapsed Taylor mode
(`dualgen.operators`), against nested first-order AD (torch.func), in one process
for time (interleaved rounds, medians) and in a fresh process per method for
peak memory; float32, 2 threads. The network is Dangel et al.'s (NeurIPS 2025):
an MLP D -> 768 -> 768 -> 512 -> 512 -> 1 with tanh.

- Exact Laplacian, D = 50: torch.func's vmap over the D vector-Hessian-vector
  products (forward over reverse), torch.func.hessian's trace, dualgen collapsed,
  and dualgen with one series per direction (not collapsed).
- Randomized Laplacian, D = 50, S = 16 Rademacher directions: nested
  vector-Hessian-vector products against dualgen collapsed.
- Biharmonic, D = 5: torch.func's Laplacian of its Laplacian (hessian of the
  hessian's trace) against dualgen collapsed (D² fourth-order directions).

Every method's values are checked against the nested reference in the run.
With `--jax-python PYTHON` (an interpreter with jax and folx: `make bench` makes
.venv-jax), the exact Laplacian's rows also hold JAX's nested AD, its
`jax.experimental.jet` and folx's forward Laplacian on the same weights and
batch, jitted (bench/taylor_jax.py), with ratios to torch.func's nested AD.

    python bench/taylor_speed.py [--batch 32] [--rounds 5] [--jax-python PYTHON]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time

import allocator
import torch
from proc_memory import reset_peak, status

import dualgen.operators as ops


def mlp(dim: int) -> torch.nn.Module:
    torch.manual_seed(0)
    widths = [dim, 768, 768, 512, 512, 1]
    layers = []
    for a, b in itertools.pairwise(widths):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1])


def _scalar(net):
    return lambda x: net(x).squeeze(-1)


def _vhvp(f):
    """v -> vᵀ H v at x, forward over reverse."""
    grad = torch.func.grad(f)

    def along(x, v):
        return torch.func.jvp(grad, (x,), (v,))[1] @ v

    return along


def methods(net, dim: int, samples: int) -> dict:
    f = _scalar(net)
    along = _vhvp(f)
    eye = torch.eye(dim)

    def nested_laplacian(x):
        return torch.vmap(lambda v: along(x, v))(eye).sum()

    def hessian_trace(x):
        return torch.func.hessian(f)(x).trace()

    def rademacher():
        return torch.randint(0, 2, (samples, dim)).float() * 2 - 1

    def nested_randomized(x):
        return torch.vmap(lambda v: along(x, v))(rademacher()).mean()

    def nested_biharmonic(x):
        def laplacian_of(g):
            return lambda y: torch.func.hessian(g)(y).trace()

        return laplacian_of(laplacian_of(f))(x)

    collapsed = ops.laplacian(net)
    per_direction = ops.laplacian(net, collapsed=False)
    randomized = ops.laplacian(net, randomization=("rademacher", samples))
    biharmonic = ops.bilaplacian(net)

    def second(g):
        return lambda x: g(x)[1].squeeze(-1)

    return {
        "laplacian": {
            "nested (torch.func vHv)": nested_laplacian,
            "torch.func.hessian trace": hessian_trace,
            "dualgen collapsed": second(collapsed),
            "dualgen per direction": second(per_direction),
        },
        "randomized laplacian": {
            "nested (torch.func vHv)": nested_randomized,
            "dualgen collapsed": second(randomized),
        },
        "biharmonic": {
            "nested (torch.func hessian of hessian)": nested_biharmonic,
            "dualgen collapsed": second(biharmonic),
        },
    }


CASES = {"laplacian": 50, "randomized laplacian": 50, "biharmonic": 5}


def _setup(case: str, batch: int, samples: int):
    dim = CASES[case]
    net = mlp(dim)
    xs = torch.randn(batch, dim, generator=torch.Generator().manual_seed(1))
    return net, xs, methods(net, dim, samples)[case]


def _batched(fn):
    return torch.vmap(fn, randomness="different")


def timings(case: str, batch: int, rounds: int, samples: int) -> dict:
    _, xs, implementations = _setup(case, batch, samples)
    results, times = {}, {name: [] for name in implementations}
    with torch.no_grad():
        for name, fn in implementations.items():
            results[name] = _batched(fn)(xs)  # warm-up: builds dualgen's programs
        for _ in range(rounds):
            for name, fn in implementations.items():
                start = time.perf_counter()
                _batched(fn)(xs)
                times[name].append(time.perf_counter() - start)
    reference = next(iter(results.values()))
    if "randomized" not in case:
        for name, value in results.items():
            torch.testing.assert_close(value, reference, rtol=2e-3, atol=1e-4)
    return {name: statistics.median(t) for name, t in times.items()}


def peak_memory(case: str, method: str, batch: int, samples: int) -> float:
    """MiB of resident memory the batch adds at its peak, in this (fresh) process:
    a warm-up of two data builds dualgen's programs first, then the high-water
    mark is reset (/proc/self/clear_refs) and read after the batch (VmHWM). (Not
    getrusage: its maximum includes the parent's size, inherited at fork.)"""
    _, xs, implementations = _setup(case, batch, samples)
    fn = _batched(implementations[method])
    with torch.no_grad():
        fn(xs[:2])
        before = status("VmRSS")
        reset_peak()
        fn(xs)
        peak = status("VmHWM")
    return (peak - before) / 1024


def _memory_in_fresh_process(case, method, batch, samples) -> float:
    command = [sys.executable, __file__, "--memory", case, method]
    # glibc as it is: freed memory goes back, so the peak is what was live.
    command += ["--batch", str(batch), "--samples", str(samples), "--malloc-as-is"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def jax_rows(python: str, batch: int, rounds: int) -> tuple[dict, dict]:
    """JAX's times and peak memory for the exact Laplacian (bench/taylor_jax.py),
    on this script's weights and batch."""
    import tempfile
    from pathlib import Path

    net, xs, _ = _setup("laplacian", batch, 1)
    arrays = {"xs": xs.numpy()}
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    for i, layer in enumerate(linears):
        arrays[f"w{i}"] = layer.weight.detach().numpy()
        arrays[f"b{i}"] = layer.bias.detach().numpy()
    script = str(Path(__file__).with_name("taylor_jax.py"))
    with tempfile.TemporaryDirectory() as folder:
        weights = str(Path(folder) / "weights.npz")
        import numpy

        numpy.savez(weights, **arrays)

        def run(*extra):
            command = [python, script, weights, "--rounds", str(rounds), *extra]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            return json.loads(out.stdout.strip().splitlines()[-1])

        times = run()
    # Not measured: XLA keeps the buffers of the compiling run (which the
    # warm-up is) in its own arena, so the batch's peak does not show in RSS.
    return times, {method: None for method in times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--memory", nargs=2, metavar=("CASE", "METHOD"))
    parser.add_argument("--jax-python", help="an interpreter with jax and folx")
    args, heap = allocator.parse_args(parser)
    torch.set_num_threads(2)
    if args.memory:
        print(json.dumps(peak_memory(*args.memory, args.batch, args.samples)))
        return
    print(f"batch {args.batch}, float32, 2 threads; {heap}")
    print("| operator | method | time (ms) | time / nested | peak MiB | MiB / nested |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        times = timings(case, args.batch, args.rounds, args.samples)
        memory = {
            m: _memory_in_fresh_process(case, m, args.batch, args.samples)
            for m in times
        }
        if case == "laplacian" and args.jax_python:
            jax_times, jax_memory = jax_rows(args.jax_python, args.batch, args.rounds)
            times.update(jax_times)
            memory.update(jax_memory)
        base_time, base_memory = next(iter(times.values())), next(iter(memory.values()))
        for method, seconds in times.items():
            mib = memory[method]
            peak = "—" if mib is None else f"{mib:.0f}"
            ratio = "—" if mib is None else f"{mib / max(base_memory, 1e-9):.2f}"
            print(
                f"| {case} | {method} | {seconds * 1e3:.1f} | "
                f"{seconds / base_time:.2f} | {peak} | {ratio} |"
            )


if __name__ == "__main__":
    main()
