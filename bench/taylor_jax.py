"""JAX's side of bench/taylor_speed.py: the same MLP and batch (weights from an
.npz that taylor_speed.py writes), per-datum exact Laplacians by nested AD
(vmap over jvp of grad), by `jax.experimental.jet` (one jet per direction), and
by folx's forward Laplacian; every function jitted (JAX's normal use;
compilation is left out of the times). Run with an interpreter that has jax and
folx (`make bench` makes .venv-jax):

    python bench/taylor_jax.py WEIGHTS.npz [--rounds 7] [--memory METHOD]

Prints one JSON object: method -> median seconds (or, with --memory, the MiB of
resident memory the batch adds at its peak, read as taylor_speed.py reads it;
taylor_speed.py does not report it: XLA's arena keeps the compiling run's
buffers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import jet
from proc_memory import reset_peak, status

jax.config.update("jax_platforms", "cpu")


def _network(weights):
    layers = [(weights[f"w{i}"], weights[f"b{i}"]) for i in range(len(weights) // 2)]

    def f(x):
        for w, b in layers[:-1]:
            x = jnp.tanh(x @ w.T + b)
        w, b = layers[-1]
        return (x @ w.T + b)[0]

    return f


def methods(f, dim: int) -> dict:
    eye = jnp.eye(dim, dtype=jnp.float32)
    grad = jax.grad(f)

    def nested(x):
        return jnp.sum(jax.vmap(lambda v: jax.jvp(grad, (x,), (v,))[1] @ v)(eye))

    def one_jet(x, v):
        _, (_, second) = jet.jet(f, (x,), ((v, jnp.zeros_like(v)),))
        return second

    def vanilla_jet(x):
        return jnp.sum(jax.vmap(lambda v: one_jet(x, v))(eye))

    import folx

    def forward_laplacian(x):
        return folx.forward_laplacian(f, sparsity_threshold=0)(x).laplacian

    return {
        "JAX nested (vmap jvp of grad)": nested,
        "JAX jet (one per direction)": vanilla_jet,
        "folx forward Laplacian": forward_laplacian,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("weights")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--memory")
    args = parser.parse_args()
    data = dict(np.load(args.weights))
    xs = jnp.asarray(data.pop("xs"))
    f = _network({k: jnp.asarray(v) for k, v in data.items()})
    found = methods(f, xs.shape[1])
    batched = {name: jax.jit(jax.vmap(fn)) for name, fn in found.items()}
    if args.memory:
        fn = batched[args.memory]
        fn(xs).block_until_ready()  # compiled, and its buffers allocated once
        before = status("VmRSS")
        reset_peak()
        fn(xs).block_until_ready()
        print(json.dumps((status("VmHWM") - before) / 1024))
        return
    values = {name: fn(xs).block_until_ready() for name, fn in batched.items()}
    reference = values["JAX nested (vmap jvp of grad)"]
    for name, value in values.items():
        np.testing.assert_allclose(value, reference, rtol=2e-3, atol=1e-4)
    times = {name: [] for name in batched}
    for _ in range(args.rounds):
        for name, fn in batched.items():
            start = time.perf_counter()
            fn(xs).block_until_ready()
            times[name].append(time.perf_counter() - start)
    print(json.dumps({name: statistics.median(t) for name, t in times.items()}))


if __name__ == "__main__":
    main()
