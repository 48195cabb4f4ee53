"""The Taylor rule of an op, as the generator classifies its forward formula
(generated/taylor.py holds one per op; a leaf module).

- `Linear`: the formula reads no primal value, so the op is linear in its
  differentiable inputs: coefficient k of the result is the JVP of coefficient k.
- `Multilinear`: the formula is a sum with one term per input of `inputs`, each
  the same form M with that input's tangent in its place (mm: self_t.mm(mat2_p) +
  self_p.mm(mat2_t)), plus terms linear in the inputs of `linear`: Leibniz's rule,
  coefficient k = sum over i + j + ... = k of M(a_i, b_j, ...).
- `ByFormula`: anything else: the JVP formula evaluated in truncated-polynomial
  arithmetic, y' = JVP(x, x'), integrated one order at a time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Linear:
    pass


@dataclass(frozen=True)
class Multilinear:
    inputs: tuple[str, ...]
    linear: tuple[str, ...] = ()


@dataclass(frozen=True)
class ByFormula:
    pass


TaylorRule = Linear | Multilinear | ByFormula
