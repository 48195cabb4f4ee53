"""The arbiter: plain PyTorch values and central finite differences along the tangents.

`d/ds program(leaves + s * tangents)` at s = 0 is what every tangent should be,
for every variable after every step, whenever the program is a function of its
leaves (`Program.finite_differences_apply`). Runs are in double precision
(float32 programs too, through `_Float64Torch`), which also makes complex tangents
exact in the sense forward AD uses: the derivative along a real parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .compare import FD_EPS
from .interpret import PlainEngine, Trace, run
from .program import Program


@dataclass
class Arbiter:
    """`reference`: the program without forward AD (the values every engine must
    give); `tangents[k][name]`: the finite-difference tangent of `name` after line
    k, where it could be taken."""

    reference: Trace
    tangents: list[dict[str, torch.Tensor]]

    def tangent(self, k: int, name: str) -> torch.Tensor | None:
        if k < len(self.tangents):
            return self.tangents[k].get(name)
        return None


def central_differences(plus: Trace, minus: Trace, eps: float) -> list[dict]:
    """Per step, (plus - minus) / (2 eps) for every variable both runs have."""
    out = []
    for after_plus, after_minus in zip(plus.states, minus.states):
        step = {}
        for name, up in after_plus.items():
            down = after_minus.get(name)
            if down is not None and up.value.shape == down.value.shape:
                step[name] = (up.value - down.value) / (2 * eps)
        out.append(step)
    return out


def arbiter(program: Program, eps: float = FD_EPS) -> Arbiter:
    """Plain values, and finite differences where the program allows them."""
    reference = run(program, PlainEngine())
    tangents: list[dict] = []
    if program.finite_differences_apply:
        plus = run(program, PlainEngine(eps, double=True))
        minus = run(program, PlainEngine(-eps, double=True))
        tangents = central_differences(plus, minus, eps)
    return Arbiter(reference, tangents)
