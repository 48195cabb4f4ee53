"""A JVP through a tensor-parallel model with dualgen, checked against one process.

The feed-forward block of a transformer, split Megatron-style over the ranks
with `parallelize_module` (the first layer's output units by column, the
second's input units by row: one all_reduce of the output), differentiated
forward with respect to its input and to its parameters (tangents as DTensors
placed like the parameters). Each rank prints how far its tangents are from
torch.func.jvp of the same model in one process.

    python -m examples.distributed.tensor_parallel_jvp [--ranks 2]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

import dualgen.forward_ad as fwAD

from .processes import spawn


def feed_forward() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)).double()


def _rank(rank: int, world_size: int) -> None:
    mesh = init_device_mesh("cpu", (world_size,))
    reference = feed_forward()
    model = parallelize_module(
        feed_forward(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}
    )
    g = torch.Generator().manual_seed(1)
    x, x_t = (torch.randn(4, 16, generator=g, dtype=torch.float64) for _ in range(2))

    # with respect to the input
    with fwAD.dual_level():
        _, tangent = fwAD.unpack_dual(model(fwAD.make_dual(x, x_t)))
    expected = torch.func.jvp(reference, (x,), (x_t,))[1]
    input_error = (tangent - expected).abs().max().item()

    # with respect to the parameters
    names = [n for n, _ in reference.named_parameters()]
    directions = {
        n: torch.randn(p.shape, generator=g, dtype=torch.float64)
        for n, p in reference.named_parameters()
    }
    with fwAD.dual_level():
        duals = {
            n: fwAD.make_dual(
                p.detach(), distribute_tensor(directions[n], mesh, p.placements)
            )
            for n, p in model.named_parameters()
        }
        out = torch.func.functional_call(model, duals, (x,))
        _, tangent = fwAD.unpack_dual(out)

    def of_parameters(*params):
        return torch.func.functional_call(reference, dict(zip(names, params)), (x,))

    primals = tuple(p.detach() for p in reference.parameters())
    expected = torch.func.jvp(
        of_parameters, primals, tuple(directions[n] for n in names)
    )[1]
    parameter_error = (tangent - expected).abs().max().item()
    print(
        f"rank {rank}: tangent w.r.t. the input off by {input_error:.1e}, "
        f"w.r.t. the parameters by {parameter_error:.1e} (float64)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    spawn(_rank, parser.parse_args().ranks)


if __name__ == "__main__":
    main()
