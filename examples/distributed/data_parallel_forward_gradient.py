"""Data-parallel forward-gradient training with dualgen, on several processes.

Every rank holds the whole model and its own shard of the data. Each step all
ranks draw the same random direction v (a shared seed), compute their loss and
its derivative along v in one forward pass (a JVP: no backward pass, no
activations kept), and average both with one `all_reduce` of the dual loss:
value and tangent travel in one message. The averaged derivative times v is an
unbiased estimate of the full-batch gradient (Baydin et al., 2022), the same on
every rank, so the replicas stay equal without sending any gradient.

    python -m examples.distributed.data_parallel_forward_gradient [--ranks 2] [--steps 300]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import dualgen.forward_ad as fwAD

from .processes import spawn


def make_model() -> nn.Module:
    torch.manual_seed(0)  # every rank starts from the same weights
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def shard_of_the_data(rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A regression problem (y = sin of a projection of x); rank r's rows."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = torch.sin(x @ torch.randn(8, 1, generator=g))
    return x.chunk(world_size)[rank], y.chunk(world_size)[rank]


def train(rank: int, world_size: int, steps: int, lr: float = 0.04) -> list[float]:
    model = make_model()
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for p in model.parameters()]
    x, y = shard_of_the_data(rank, world_size)
    direction_seed = torch.Generator().manual_seed(2)  # the same stream on every rank
    losses = []
    for _ in range(steps):
        direction = [torch.randn(p.shape, generator=direction_seed) for p in params]
        with fwAD.dual_level():
            duals = dict(
                zip(names, (fwAD.make_dual(p, v) for p, v in zip(params, direction)))
            )
            prediction = torch.func.functional_call(model, duals, (x,))
            loss = (prediction - y).pow(2).mean()
            dist.all_reduce(
                loss, op=dist.ReduceOp.AVG
            )  # value and tangent, one message
            value, derivative = fwAD.unpack_dual(loss)
        params = [p - lr * derivative * v for p, v in zip(params, direction)]
        losses.append(value.item())
    return losses


def _rank(rank: int, world_size: int, steps: int, out: str) -> None:
    losses = train(rank, world_size, steps)
    if rank == 0:
        Path(out).write_text(" ".join(f"{v:.6f}" for v in losses))


def run(world_size: int = 2, steps: int = 300) -> list[float]:
    """Train on `world_size` processes; the loss after each step (rank 0's view,
    which is every rank's: the loss is averaged over ranks)."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "losses.txt")
        spawn(_rank, world_size, steps, out)
        return [float(v) for v in Path(out).read_text().split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    losses = run(args.ranks, args.steps)
    for step in range(0, len(losses), max(1, len(losses) // 10)):
        print(f"step {step:4d}  loss {losses[step]:.4f}")
    print(f"final     loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
