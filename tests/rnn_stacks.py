"""Arguments of `_cudnn_rnn` (cuDNN's whole recurrent stack) as nn.RNN, nn.LSTM and
nn.GRU pass them on CUDA, with tangents, for the tests of its rule; and the same
stack through torch's CPU ops (`torch._VF`), whose native forward AD is the oracle."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import _VF

GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # cudnnRNNMode_t: ReLU, tanh, LSTM, GRU
CPU_OPS = {0: _VF.rnn_relu, 1: _VF.rnn_tanh, 2: _VF.lstm, 3: _VF.gru}
FEATURES, HIDDEN, BATCH, STEPS = 3, 4, 3, 4
PACKED_SIZES = [3, 3, 2, 1]  # rows per step of a packed batch (sum: 9)


@dataclass(frozen=True)
class Stack:
    """One _cudnn_rnn call's configuration."""

    mode: int
    layers: int = 1
    bidirectional: bool = False
    bias: bool = True
    proj: int = 0
    batch_first: bool = False
    packed: bool = False
    dropout: float = 0.0
    train: bool = True
    sizes: list = field(default_factory=lambda: list(PACKED_SIZES))

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def out(self) -> int:
        return self.proj or HIDDEN

    @property
    def stride(self) -> int:
        return 2 + 2 * self.bias + (self.proj > 0)

    def __str__(self) -> str:
        parts = [["relu", "tanh", "lstm", "gru"][self.mode], f"{self.layers}l"]
        for flag in ("bidirectional", "packed", "batch_first"):
            if getattr(self, flag):
                parts.append(flag)
        if not self.bias:
            parts.append("nobias")
        if self.proj:
            parts.append(f"proj{self.proj}")
        return "-".join(parts)


def draw(stack: Stack, seed: int, dtype=torch.float64):
    """Primal (input, weights, hx, cx) of the stack and a tangent for each (cx
    None but for the LSTM), drawn on the CPU."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) * 0.5

    rows = GATES[stack.mode] * HIDDEN
    weights = []
    for layer in range(stack.layers):
        for _ in range(stack.directions):
            width = FEATURES if layer == 0 else stack.directions * stack.out
            weights += [r(rows, width), r(rows, stack.out)]
            if stack.bias:
                weights += [r(rows), r(rows)]
            if stack.proj:
                weights.append(r(stack.proj, HIDDEN))
    if stack.packed:
        x = r(sum(stack.sizes), FEATURES)
    elif stack.batch_first:
        x = r(BATCH, STEPS, FEATURES)
    else:
        x = r(STEPS, BATCH, FEATURES)
    states = stack.layers * stack.directions
    hx = r(states, BATCH, stack.out)
    cx = r(states, BATCH, HIDDEN) if stack.mode == 2 else None
    primals = (x, weights, hx, cx)
    tangents = (
        r(*x.shape),
        [r(*w.shape) for w in weights],
        r(*hx.shape),
        None if cx is None else r(*cx.shape),
    )
    return primals, tangents


def tangent_args(stack: Stack, primals, tangents) -> tuple:
    """The arguments of dualgen.formulas.cudnn_rnn_tangents (and its C++ twin) for
    the stack at `primals` along `tangents`."""
    x, weights, hx, cx = primals
    dx, dweights, dhx, dcx = tangents
    return (
        dx,
        dweights,
        dhx,
        dcx,
        x,
        weights,
        stack.stride,
        hx,
        cx,
        stack.mode,
        stack.proj,
        stack.layers,
        stack.batch_first,
        stack.dropout,
        stack.train,
        stack.bidirectional,
        stack.sizes if stack.packed else [],
    )


def cudnn_call(stack: Stack, x, weights, hx, cx):
    """(output, hy, cy, reserve, weight_buf) of aten._cudnn_rnn."""
    return torch.ops.aten._cudnn_rnn(
        x,
        weights,
        stack.stride,
        None,
        hx,
        cx,
        stack.mode,
        HIDDEN,
        stack.proj,
        stack.layers,
        stack.batch_first,
        stack.dropout,
        stack.train,
        stack.bidirectional,
        stack.sizes if stack.packed else [],
        None,
    )


def cpu_call(stack: Stack, x, weights, hx, cx):
    """(output, hy, cy or None) of the same stack by torch's CPU ops."""
    fn = CPU_OPS[stack.mode]
    state = (hx, cx) if stack.mode == 2 else hx
    if stack.packed:
        sizes = torch.tensor(stack.sizes)
        result = fn(
            x,
            sizes,
            state,
            weights,
            stack.bias,
            stack.layers,
            0.0,
            False,
            stack.bidirectional,
        )
    else:
        result = fn(
            x,
            state,
            weights,
            stack.bias,
            stack.layers,
            0.0,
            False,
            stack.bidirectional,
            stack.batch_first,
        )
    return tuple(result) if stack.mode == 2 else (*result, None)
