"""Benchmark: dualgen.forward_ad against torch.autograd.forward_ad and torch.func.jvp.

In one process, interleaved (each round times every implementation once, in turn),
the median of the rounds per implementation; ratios are dualgen / native.
Cases: a chain of element-wise ops (also on an input requiring grad, as in a
training step: exp, tanh and sigmoid's formulas read their outputs), an MLP with biases with tangents on the input,
the same MLP with tangents on its parameters (torch.func.functional_call), with
the parameters detached and with them requiring grad (inside a training step), and
single ops mixing a dual and a plain value. Tiny sizes are overhead-bound, large
ones compute-bound. dualgen runs with its C++ kernels and hot path (the default
when built) and with its Python kernels (`--per-op` first prints the cost of single
ops at 4x4, one thread, and of a level with one make_dual and unpack_dual).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable

import allocator
import torch
import torch.autograd.forward_ad as native_ad
from bench_models import make_convnet, make_encoder_layer
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import dualgen
import dualgen.forward_ad as dual_ad

torch.set_num_threads(2)
torch.backends.mha.set_fastpath_enabled(False)


def chain(x):
    y = x.sin() * x.cos()
    y = y.exp() + x
    y = torch.tanh(y) * 0.5
    return torch.sigmoid(y) - x


CHAIN_OPS = 9


def with_api(api, fn, primal, tangent):
    with api.dual_level():
        out = fn(api.make_dual(primal, tangent))
        return api.unpack_dual(out).tangent


def with_func(fn, primal, tangent):
    return torch.func.jvp(fn, (primal,), (tangent,))[1]


def make_mlp(width: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(width, width),
        nn.Tanh(),
        nn.Linear(width, width),
        nn.Tanh(),
        nn.Linear(width, width),
    )


def math_attention(layer: nn.Module) -> Callable:
    """The layer without its fused fast path, attention by its definition: native
    forward AD has no rule for the fused CPU kernels (dualgen has), so both run
    the same ops here."""

    def run(x):
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            return layer(x)

    return run


def parameter_case(model: nn.Module, x: torch.Tensor, requires_grad: bool = False):
    """Tangents on the parameters; with `requires_grad` the parameters stay in
    autograd's graph (a JVP inside a training step), so formulas that read their
    op's output (tanh) need it recorded."""
    names = [n for n, _ in model.named_parameters()]
    params = [p if requires_grad else p.detach() for p in model.parameters()]
    tangents = [torch.randn_like(p) for p in params]

    def f(*ps):
        return torch.func.functional_call(model, dict(zip(names, ps)), (x,))

    def with_api_params(api):
        with api.dual_level():
            duals = [api.make_dual(p, t) for p, t in zip(params, tangents)]
            return api.unpack_dual(f(*duals)).tangent

    return {
        "native": lambda: with_api_params(native_ad),
        "func.jvp": lambda: torch.func.jvp(f, tuple(params), tuple(tangents))[1],
        "dualgen": lambda: with_api_params(dual_ad),
    }


def input_case(fn: Callable, x: torch.Tensor):
    t = torch.randn_like(x)
    return {
        "native": lambda: with_api(native_ad, fn, x, t),
        "func.jvp": lambda: with_func(fn, x, t),
        "dualgen": lambda: with_api(dual_ad, fn, x, t),
    }


# dualgen's two kernel backends: each implementation named here runs with it.
BACKENDS = {"dualgen": "cpp", "dualgen (Python)": "python"}


def with_backends(impls: dict[str, Callable]) -> dict[str, Callable]:
    """`impls` with dualgen's run twice: C++ kernels, and Python kernels."""
    out = {k: v for k, v in impls.items() if k != "dualgen"}
    for name in BACKENDS:
        out[name] = impls["dualgen"]
    return out


def measure(impls: dict[str, Callable], rounds: int, budget: float) -> dict[str, float]:
    for name, fn in impls.items():  # warm up, settle how many calls make one sample
        _backend_for(name)
        fn()
    name, fn = next(iter(impls.items()))
    _backend_for(name)
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    calls = max(1, int(budget / rounds / len(impls) / once))
    samples: dict[str, list[float]] = {k: [] for k in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            _backend_for(name)  # outside the timed loop
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls)
    return {k: statistics.median(v) for k, v in samples.items()}


def _backend_for(name: str) -> None:
    backend = BACKENDS.get(name)
    if backend is not None and dualgen.kernel_backend() != backend:
        dualgen.set_kernel_backend(backend)


def per_op(rounds: int, budget: float) -> None:
    """Single ops on a 4x4 float32 dual, one thread, each inside an open level."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    x, t, plain = (torch.randn(4, 4) for _ in range(3))
    ops = {
        "sin": lambda d: d.sin(),
        "add": lambda d: d + d,
        "mul": lambda d: d * d,
        "mm": lambda d: d.mm(d),
        ".t()": lambda d: d.t(),
        "dual * plain": lambda d: d * plain,
        "dual * 2.0": lambda d: d * 2.0,
    }
    print("| op (4x4 float32, 1 thread) | native | dualgen | dualgen (Python) |")
    print("|---|---|---|---|")
    for label, op in ops.items():
        times = {}
        for name, api in (("native", native_ad), *((n, dual_ad) for n in BACKENDS)):
            _backend_for(name)
            with api.dual_level():
                d = api.make_dual(x, t)
                call = functools.partial(op, d)
                times[name] = measure({"op": call}, rounds, budget)["op"]
        _backend_for("dualgen")
        row = " | ".join(f"{times[k] * 1e6:.1f} µs" for k in ("native", *BACKENDS))
        print(f"| {label} | {row} |")

    def level(api):
        with api.dual_level():
            api.unpack_dual(api.make_dual(x, t))

    impls = with_backends(
        {"native": lambda: level(native_ad), "dualgen": lambda: level(dual_ad)}
    )
    times = measure(impls, rounds, budget)
    row = " | ".join(f"{times[k] * 1e6:.1f} µs" for k in ("native", *BACKENDS))
    print(f"| level + make_dual + unpack_dual | {row} |\n")
    floor = dispatch_mode_floor(x, rounds, budget)
    print(
        "The floor of any dispatch mode: `.t()` of a plain 4x4 tensor takes "
        f"{floor['plain'] * 1e6:.1f} µs alone and {floor['mode'] * 1e6:.1f} µs under "
        "a Python dispatch mode that only runs the op.\n"
    )
    torch.set_num_threads(threads)


class _RunsTheOp(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def dispatch_mode_floor(x: torch.Tensor, rounds: int, budget: float) -> dict:
    """What torch's Python dispatch mode costs by itself: the round trip of an
    op's arguments to Python and back, which every op under dualgen pays."""
    mode = _RunsTheOp()

    def under_mode():
        with mode:
            for _ in range(10):
                x.t()

    def alone():
        for _ in range(10):
            x.t()

    times = measure({"mode": under_mode, "plain": alone}, rounds, budget)
    return {k: v / 10 for k, v in times.items()}


def cases(quick: bool):
    tiny, large = 16, (1 << 18 if quick else 1 << 21)
    width_tiny, width_large, batch_large = (
        16,
        (256 if quick else 1024),
        (64 if quick else 512),
    )
    d = torch.float32
    mlp_tiny, mlp_large = make_mlp(width_tiny), make_mlp(width_large)
    x_tiny = torch.randn(4, width_tiny, dtype=d)
    x_large = torch.randn(batch_large, width_large, dtype=d)
    plain = torch.randn(tiny, dtype=d)
    yield "element-wise chain (9 ops)", "tiny", input_case(
        chain, torch.randn(tiny, dtype=d)
    ), CHAIN_OPS
    yield "element-wise chain (9 ops)", "large", input_case(
        chain, torch.randn(large, dtype=d)
    ), CHAIN_OPS
    yield "element-wise chain, input requiring grad", "tiny", input_case(
        chain, torch.randn(tiny, dtype=d, requires_grad=True)
    ), CHAIN_OPS
    yield "element-wise chain, input requiring grad", "large", input_case(
        chain, torch.randn(large, dtype=d, requires_grad=True)
    ), CHAIN_OPS
    yield "MLP, tangent on input", "tiny", input_case(mlp_tiny, x_tiny), None
    yield "MLP, tangent on input", "large", input_case(mlp_large, x_large), None
    yield "MLP, tangents on parameters", "tiny", parameter_case(mlp_tiny, x_tiny), None
    yield "MLP, tangents on parameters", "large", parameter_case(
        mlp_large, x_large
    ), None
    yield "MLP, tangents on parameters requiring grad", "tiny", parameter_case(
        mlp_tiny, x_tiny, requires_grad=True
    ), None
    yield "MLP, tangents on parameters requiring grad", "large", parameter_case(
        mlp_large, x_large, requires_grad=True
    ), None
    conv_tiny, conv_large = make_convnet(8), make_convnet(64)
    yield "convnet (eval), tangent on input", "tiny", input_case(
        conv_tiny, torch.randn(2, 3, 8, 8, dtype=d)
    ), None
    yield "convnet (eval), tangent on input", "large", input_case(
        conv_large, torch.randn(32, 3, 32, 32, dtype=d)
    ), None
    layer_tiny, layer_large = make_encoder_layer(16), make_encoder_layer(256)
    yield "transformer encoder layer (eval), tangent on input", "tiny", input_case(
        math_attention(layer_tiny), torch.randn(2, 5, 16, dtype=d)
    ), None
    yield "transformer encoder layer (eval), tangent on input", "large", input_case(
        math_attention(layer_large), torch.randn(16, 128, 256, dtype=d)
    ), None
    yield "dual * tensor", "tiny", input_case(
        lambda x: x * plain, torch.randn(tiny, dtype=d)
    ), 1
    yield "dual + 2.0", "tiny", input_case(
        lambda x: x + 2.0, torch.randn(tiny, dtype=d)
    ), 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes, fewer rounds"
    )
    parser.add_argument(
        "--size", choices=["tiny", "large"], help="only the cases of this size"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object of times (seconds)"
    )
    parser.add_argument(
        "--per-op", action="store_true", help="first, the per-op table (4x4, 1 thread)"
    )
    allocator.add_argument(parser)
    args = parser.parse_args()
    heap = allocator.configure(args)
    rounds, budget = (5, 0.5) if args.quick else (11, 2.0)
    selected = [
        (name, size, with_backends(impls), ops)
        for name, size, impls, ops in cases(args.quick)
        if args.size in (None, size)
    ]
    if args.json:
        times = {
            f"{name} | {size}": measure(impls, rounds, budget)
            for name, size, impls, _ops in selected
        }
        print(json.dumps(times))
        return
    if args.per_op:
        per_op(rounds, budget / 4)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, median of {rounds} rounds, {heap}\n"
    )
    print(
        "| case | size | native | func.jvp | dualgen | dualgen (Python) "
        "| dualgen / native | dualgen (Python) / native | dualgen / func.jvp |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, size, impls, _ops in selected:
        t = measure(impls, rounds, budget)
        columns = ("native", "func.jvp", "dualgen", "dualgen (Python)")
        row = [f"{t[k] * 1e6:.0f} µs" for k in columns]
        print(
            f"| {name} | {size} | {' | '.join(row)} | "
            f"{t['dualgen'] / t['native']:.2f}x | "
            f"{t['dualgen (Python)'] / t['native']:.2f}x | "
            f"{t['dualgen'] / t['func.jvp']:.2f}x |"
        )


if __name__ == "__main__":
    main()
