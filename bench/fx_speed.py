"""Benchmark: the JVP and VJP programs of dualgen.fx against native.

For each workload of bench/runtime_speed.py (tiny and large), in one process,
interleaved, median of the rounds: the JVP program replayed eagerly
(`gm(*primals, *tangents)`) against torch.autograd.forward_ad and
torch.func.jvp; with `--compile`, `torch.compile` of the program against
`torch.compile` of torch.func.jvp (after a warm-up call each: compile time is not
timed, and a compile that fails is reported as such): the program's `forward`,
a function as func.jvp's is, and the program as a module (`torch.compile(gm)`,
which adds nn.Module's call, a few microseconds); and the VJP program
against torch.autograd.grad of the same function. Tracing time (dualgen.fx.jvp,
once) is reported apart.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import allocator
import torch
import torch.autograd.forward_ad as native_ad
from bench_models import make_convnet, make_encoder_layer
from runtime_speed import chain, make_mlp, math_attention, measure

import dualgen.fx

torch.set_num_threads(2)
torch.backends.mha.set_fastpath_enabled(False)


def workloads(quick: bool):
    """(name, size, f, primals): f a function of the primals."""
    tiny, large = 16, (1 << 18 if quick else 1 << 21)
    width, batch = (256, 64) if quick else (1024, 512)
    d = torch.float32
    yield "element-wise chain (9 ops)", "tiny", chain, (torch.randn(tiny, dtype=d),)
    yield "element-wise chain (9 ops)", "large", chain, (torch.randn(large, dtype=d),)
    for size, model, x in (
        ("tiny", make_mlp(16), torch.randn(4, 16, dtype=d)),
        ("large", make_mlp(width), torch.randn(batch, width, dtype=d)),
    ):
        yield "MLP, tangent on input", size, model, (x,)
        yield ("MLP, tangents on parameters", size, *_on_parameters(model, x))
    for size, channels, x in (
        ("tiny", 8, torch.randn(2, 3, 8, 8, dtype=d)),
        ("large", 64, torch.randn(32, 3, 32, 32, dtype=d)),
    ):
        yield "convnet (eval), tangent on input", size, make_convnet(channels), (x,)
    for size, width_, x in (
        ("tiny", 16, torch.randn(2, 5, 16, dtype=d)),
        ("large", 256, torch.randn(16, 128, 256, dtype=d)),
    ):
        layer = math_attention(make_encoder_layer(width_))
        yield "transformer encoder layer (eval), tangent on input", size, layer, (x,)


def _on_parameters(model, x):
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach() for p in model.parameters())

    def f(*ps):
        return torch.func.functional_call(model, dict(zip(names, ps)), (x,))

    return f, params


def native_jvp(f: Callable, primals: tuple, tangents: tuple):
    with native_ad.dual_level():
        duals = [native_ad.make_dual(p, t) for p, t in zip(primals, tangents)]
        return native_ad.unpack_dual(f(*duals)).tangent


def native_vjp(f: Callable, primals: tuple, cotangent):
    leaves = [p.detach().requires_grad_() for p in primals]
    out = f(*leaves)
    return torch.autograd.grad(out, leaves, cotangent)


def run_case(f, primals, rounds: int, budget: float, compile_: bool) -> dict:
    tangents = tuple(torch.randn_like(p) for p in primals)
    start = time.perf_counter()
    jvp_gm = dualgen.fx.jvp(f, primals, tangents)
    traced = time.perf_counter() - start
    vjp_gm = dualgen.fx.vjp(f, primals)
    cotangent = torch.randn_like(f(*primals))
    impls = {
        "native": lambda: native_jvp(f, primals, tangents),
        "func.jvp": lambda: torch.func.jvp(f, primals, tangents),
        "fx": lambda: jvp_gm(*primals, *tangents),
    }
    times = measure(impls, rounds, budget)
    backward = measure(
        {
            "autograd.grad": lambda: native_vjp(f, primals, cotangent),
            "fx vjp": lambda: vjp_gm(*primals, cotangent),
        },
        rounds,
        budget,
    )
    times.update(backward)
    times["trace"] = traced
    if compile_:
        times.update(_compiled(f, primals, tangents, jvp_gm, rounds, budget))
    return times


def _compiled(f, primals, tangents, jvp_gm, rounds, budget) -> dict:
    torch._dynamo.reset()
    count = len(primals)
    compiled_gm = torch.compile(jvp_gm)
    compiled_forward = torch.compile(jvp_gm.forward)  # (a function, as func.jvp's)
    compiled_func = torch.compile(
        lambda *values: torch.func.jvp(f, values[:count], values[count:])
    )
    impls = {}
    for name, fn in (  # (both take the primals and the tangents as inputs)
        ("compiled fx", lambda: compiled_gm(*primals, *tangents)),
        ("compiled fx forward", lambda: compiled_forward(*primals, *tangents)),
        ("compiled func.jvp", lambda: compiled_func(*primals, *tangents)),
    ):
        try:
            fn()
            impls[name] = fn
        except Exception as error:  # noqa: BLE001 - reported in the table
            print(f"  {name} failed: {type(error).__name__}: {str(error)[:200]}")
    return measure(impls, rounds, budget) if impls else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--compile", action="store_true", help="also torch.compile")
    parser.add_argument("--size", choices=["tiny", "large"])
    allocator.add_argument(parser)
    args = parser.parse_args()
    footnote = allocator.configure(args)
    rounds, budget = (5, 1.0) if args.quick else (11, 3.0)
    rows, ratios = [], {"tiny": [], "large": []}
    for name, size, f, primals in workloads(args.quick):
        if args.size and size != args.size:
            continue
        t = run_case(f, primals, rounds, budget, args.compile)
        ratio = t["fx"] / t["native"]
        ratios[size].append(ratio)
        compiled = "failed"
        if "compiled fx" in t and "compiled func.jvp" in t:
            function, module = (
                t[k] / t["compiled func.jvp"]
                for k in ("compiled fx forward", "compiled fx")
            )
            compiled = f"{function:.2f}x (module {module:.2f}x)"
        elif "compiled fx" in t:
            compiled = "works; torch.compile(func.jvp) fails"
        rows.append(
            f"| {name} | {size} | {_us(t['native'])} | {_us(t['func.jvp'])} | "
            f"{_us(t['fx'])} | {ratio:.2f}x | {t['fx'] / t['func.jvp']:.2f}x | "
            f"{t['fx vjp'] / t['autograd.grad']:.2f}x | {t['trace'] * 1e3:.0f} ms"
            + (f" | {compiled} |" if args.compile else " |")
        )
    print(
        f"torch {torch.__version__}, 2 threads, float32, median of {rounds} rounds, {footnote}\n"
    )
    head = (
        "| case | size | native | func.jvp | fx.jvp program | program / native "
        "| program / func.jvp | fx.vjp program / autograd.grad | tracing"
    )
    print(
        head + (" | compiled program / compiled func.jvp |" if args.compile else " |")
    )
    print("|---" * (10 if args.compile else 9) + "|")
    print("\n".join(rows))
    for size, values in ratios.items():
        if values:
            mean = math.exp(statistics.mean(math.log(v) for v in values))
            print(f"\n{size}: geometric mean of program / native {mean:.2f}x")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


if __name__ == "__main__":
    main()
