"""Small models and their tensor-parallel plans, for the DTensor cases."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()


MLP_PLAN = {"0": ColwiseParallel(), "2": RowwiseParallel()}


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim) for _ in range(3))
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, _ = x.shape
        # (-1: the heads this rank holds under tensor parallelism)
        q, k, v = (
            w(x).view(batch, length, -1, self.head_dim).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5
        out = scores.softmax(-1) @ v
        return self.wo(out.transpose(1, 2).reshape(batch, length, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1, self.w2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    """A transformer block (pre-norm attention, then an MLP)."""

    def __init__(self, dim: int = 8, heads: int = 4, hidden: int = 16):
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = nn.LayerNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


def block() -> nn.Module:
    return Block().double()


def block_plan() -> dict:
    """Megatron-style: attention heads and the MLP's hidden units split across
    ranks, the norms sequence-parallel (the block's input and output are each
    rank's chunk of the sequence)."""
    gathered = PrepareModuleInput(
        input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
    )
    return {
        "attention_norm": SequenceParallel(),
        "attention": gathered,
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
        ),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    }


def copies(make, seed: int = 0) -> tuple[nn.Module, nn.Module]:
    """Two models with the same weights: one to parallelise, one for reference."""
    torch.manual_seed(seed)
    model = make()
    reference = make()
    reference.load_state_dict(model.state_dict())
    return model, reference
