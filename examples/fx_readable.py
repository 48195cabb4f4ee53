"""The README's dualgen.fx example: a small function, its JVP program and its
VJP program, printed as torch.fx code (`python examples/fx_readable.py`)."""

import torch

import dualgen.fx


def f(x, w):
    return torch.tanh(x @ w).sum(-1)


x, w = torch.randn(2, 3), torch.randn(3, 4)
jvp = dualgen.fx.jvp(f, (x, w), (torch.randn(2, 3), None))  # a tangent on x only
vjp = dualgen.fx.vjp(f, (x, w))
print(jvp.print_readable(print_output=False))
print(vjp.print_readable(print_output=False))
